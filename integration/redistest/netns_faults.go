package redistest

import (
	"fmt"
	"strings"
)

// nftTable is the table of a Net's faults: family bridge, in the hub's namespace.
const nftTable = "holdfast"

// Cut drops every packet between any host of a and any host of b, both ways: a
// partition. Connections stay open and nothing is reset; packets are silently
// lost until [Net.Heal] (TCP then retransmits them). Faults add up until Heal.
// It fails the test that made the Net when the rules cannot be applied.
func (n *Net) Cut(a, b []*Host) {
	n.tb.Helper()
	n.addRules(n.drop(a, b, ""), n.drop(b, a, ""))
}

// CutOneWay drops every packet from any host of from to any host of to, and none
// the other way: an asymmetric link. No new TCP connection gets through either way
// (the handshake needs both). On an open connection, data sent the open way is
// delivered but never acknowledged, so its sender stops sending new data at its
// first retransmission time-out (200 ms or more) until [Net.Heal].
func (n *Net) CutOneWay(from, to []*Host) {
	n.tb.Helper()
	n.addRules(n.drop(from, to, ""))
}

// Flaky drops lossPercent percent (0 to 100) of the packets between any host of a
// and any host of b, at random, both ways.
func (n *Net) Flaky(a, b []*Host, lossPercent int) {
	n.tb.Helper()
	if lossPercent < 0 || lossPercent > 100 {
		n.tb.Fatalf("redistest: Flaky: loss %d%% is not a percentage", lossPercent)
	}
	cond := fmt.Sprintf("numgen random mod 100 < %d ", lossPercent)
	n.addRules(n.drop(a, b, cond), n.drop(b, a, cond))
}

// Heal removes every fault: packets flow again between all hosts.
func (n *Net) Heal() {
	n.tb.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.rules = nil
	if err := n.applyRules(); err != nil {
		n.tb.Fatalf("redistest: Heal: %v", err)
	}
}

// drop returns the rule dropping the packets from any host of from to any host of
// to for which cond (nft expressions, possibly empty) holds; "" when either is empty.
func (n *Net) drop(from, to []*Host, cond string) string {
	n.tb.Helper()
	if len(from) == 0 || len(to) == 0 {
		return ""
	}
	return fmt.Sprintf("ip saddr %s ip daddr %s %sdrop", n.ipSet(from), n.ipSet(to), cond)
}

// ipSet returns the nft set of the hosts' addresses; the hosts must be n's.
func (n *Net) ipSet(hosts []*Host) string {
	n.tb.Helper()
	ips := make([]string, len(hosts))
	for i, h := range hosts {
		if h == nil || h.net != n {
			n.tb.Fatalf("redistest: a fault names a host that is not in this Net (%v)", h)
		}
		ips[i] = h.IP
	}
	return "{ " + strings.Join(ips, ", ") + " }"
}

// addRules adds the non-empty rules to the faults in force and applies them all.
func (n *Net) addRules(rules ...string) {
	n.tb.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, r := range rules {
		if r != "" {
			n.rules = append(n.rules, r)
		}
	}
	if err := n.applyRules(); err != nil {
		n.tb.Fatalf("redistest: applying faults: %v", err)
	}
}

// applyRules replaces the hub's fault table by one holding n.rules, in one nft
// transaction (none when there are no rules). The rules see every frame the bridge
// forwards from a host to another; ARP is not IP, so it still passes. Called with
// n.mu held.
func (n *Net) applyRules() error {
	var b strings.Builder
	fmt.Fprintf(&b, "table bridge %s\ndelete table bridge %s\n", nftTable, nftTable)
	if len(n.rules) > 0 {
		fmt.Fprintf(&b, "table bridge %s {\n\tchain forward {\n\t\ttype filter hook forward priority 0; policy accept;\n", nftTable)
		for _, r := range n.rules {
			fmt.Fprintf(&b, "\t\t%s\n", r)
		}
		b.WriteString("\t}\n}\n")
	}
	return runTool(b.String(), n.ip, "netns", "exec", n.prefix, n.nft, "-f", "-")
}
