package lua

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// An election (rlock.Election) is a fenced lock (RLock's hash, Redisson's
// token counter) plus two names of its own, in the lock's hash slot: the
// leader record, a hash {holder, token, value, since} written by the winning
// campaign, and the election channel, on which every change of leader is
// announced.
var (
	//go:embed elect_acquire.lua
	electAcquireSrc string
	//go:embed elect_proclaim.lua
	electProclaimSrc string
	//go:embed elect_resign.lua
	electResignSrc string
	//go:embed elect_leader.lua
	electLeaderSrc string

	// electAcquireScript runs acquire.lua as the function acquire(), then
	// records the leader (elect_acquire.lua).
	electAcquireScript  = newScript("elect_acquire", lockShapeSrc+"local function acquire()\n"+acquireSrc+"\nend\n"+electAcquireSrc)
	electProclaimScript = newScript("elect_proclaim", electProclaimSrc)
	electResignScript   = newScript("elect_resign", electResignSrc)
	electLeaderScript   = newScript("elect_leader", lockShapeSrc+electLeaderSrc)
)

// Names of an election's keys and channel.
const (
	electionPrefix = "holdfast_election"
	LeaderSuffix   = ":leader" // see LeaderRecordName
)

// ElectionChannel returns the channel on which changes of leader of the
// election name are announced: "holdfast_election:{name}", or
// "holdfast_election:name" when name contains '{' (Redisson's prefix rule, as
// ChannelName). A message's payload is the new term's fencing token, or "0"
// when a leader resigned.
func ElectionChannel(name string) string { return prefixed(electionPrefix, name) }

// LeaderRecordName returns the leader record of the election name: the hash
// "{name}:leader", or "name:leader" when name contains '{' (Redisson's suffix
// rule, as PermitTimeoutsName).
func LeaderRecordName(name string) string {
	if strings.Contains(name, "{") {
		return name + LeaderSuffix
	}
	return "{" + name + "}" + LeaderSuffix
}

// CheckElectionName returns an error matching ErrSlot for an election name
// whose lock's keys (CheckName), leader record or channel would hash to
// another cluster slot than the name.
func CheckElectionName(name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if !sameSlot(name, LeaderRecordName(name), ElectionChannel(name), TokenName(name)) {
		return refuse("its leader record and channel", tagRule, tagAdvice, "{"+bare(name, "election")+"}")
	}
	return nil
}

// Elect makes an acquisition a campaign in an election (AcquireArgs.Elect):
// when it takes the lock, the same script records the leader and announces it.
// Make one per campaign.
type Elect struct {
	record, channel any    // the leader record and the election channel, boxed
	value           string // the value proclaimed
}

// NewElect returns the campaign for value in the election of the lock l.
func NewElect(l *Lock, value string) *Elect {
	return &Elect{record: LeaderRecordName(l.name), channel: ElectionChannel(l.name), value: value}
}

// electCall sends the campaign's acquisition (elect_acquire.lua).
func electCall(ctx context.Context, rdb Processor, a AcquireArgs) (any, int, error) {
	l, e := a.Lock, a.Elect
	return electAcquireScript.call(ctx, rdb, []any{nil, nil, 4, l.key, l.tk, e.record, e.channel,
		a.Lease.arg(), a.Field.arg(), a.Expected, e.value, publish(a.Publish)}, a.Acks)
}

// Proclaim sets the value of the leader field, whose term has the fencing
// token token, in the election of l (elect_proclaim.lua), and announces it. It
// reports false, changing nothing, when field no longer holds l.
func Proclaim(ctx context.Context, rdb Processor, l *Lock, field string, token int64, value, publishCmd string) (bool, error) {
	v, err := electProclaimScript.run(ctx, rdb, []any{nil, nil, 3, l.key, LeaderRecordName(l.name), ElectionChannel(l.name),
		field, strconv.FormatInt(token, 10), value, publish(publishCmd)})
	return flagReply("proclaim", v, err)
}

// Resign clears the record of the former leader field, whose term had the
// fencing token token, in the election of l, once field has released l
// (elect_resign.lua), and announces that there is no leader. It reports false,
// changing nothing, when the record is another term's or field still holds l.
func Resign(ctx context.Context, rdb Processor, l *Lock, field string, token int64, publishCmd string) (bool, error) {
	v, err := electResignScript.run(ctx, rdb, []any{nil, nil, 3, l.key, LeaderRecordName(l.name), ElectionChannel(l.name),
		field, strconv.FormatInt(token, 10), publish(publishCmd)})
	return flagReply("resign", v, err)
}

// flagReply reads a script's 0 or 1.
func flagReply(op string, v any, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	if n, ok := v.(int64); ok && (n == 0 || n == 1) {
		return n == 1, nil
	}
	return false, fmt.Errorf("lua: unexpected %s reply %#v", op, v)
}

// LeaderReply is an election's leader as Leader read it.
type LeaderReply struct {
	Holder string        // the lock's owner field; "" when the lock is free
	Token  int64         // the term's fencing token
	Value  string        // the value proclaimed ("" when not Proclaimed)
	Since  time.Time     // when the term began, on the server's clock (zero when not Proclaimed)
	TTL    time.Duration // the lock's remaining lease; -1: no expiry
	// Proclaimed reports that the holder wrote the leader record: a holdfast
	// campaign. A Java process holding the lock writes none: Token is then
	// the lock's token counter, as its RFencedLock took it.
	Proclaimed bool
}

// Leader reads the leader of the election of l (elect_leader.lua) in one
// round trip. When l is free, the reply's Holder is "" and its Token the
// latest term's (the token counter). A record whose holder no longer holds l
// is never read.
func Leader(ctx context.Context, rdb Processor, l *Lock) (LeaderReply, error) {
	v, err := electLeaderScript.run(ctx, rdb, []any{nil, nil, 3, l.key, LeaderRecordName(l.name), l.tk})
	if err != nil {
		return LeaderReply{}, err
	}
	return leaderReply(v)
}

// leaderReply decodes elect_leader.lua's array.
func leaderReply(v any) (LeaderReply, error) {
	a, ok := v.([]any)
	bad := fmt.Errorf("lua: unexpected leader reply %#v", v)
	if !ok || len(a) != 6 {
		return LeaderReply{}, bad
	}
	holder, ok1 := a[0].(string)
	token, ok2 := a[1].(string)
	value, ok3 := a[2].(string)
	since, ok4 := a[3].(string)
	pttl, ok5 := a[4].(int64)
	proclaimed, ok6 := a[5].(int64)
	t, err1 := strconv.ParseInt(token, 10, 64)
	s, err2 := strconv.ParseInt(since, 10, 64)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || err1 != nil || err2 != nil {
		return LeaderReply{}, bad
	}
	r := LeaderReply{Holder: holder, Token: t, Value: value, TTL: ttl(pttl), Proclaimed: proclaimed == 1}
	if r.Proclaimed {
		r.Since = time.UnixMilli(s)
	}
	return r, nil
}
