package chaos

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckerCatchesElectionBugs: the election checks find a term whose
// token is not above an earlier term's, a follower's view that goes back in
// term, one read after a newer term was acquired, and one of a term whose
// resignation was confirmed before the read; a clean history passes.
func TestCheckerCatchesElectionBugs(t *testing.T) {
	const ms = int64(1e6)
	term := func(proc int, hold, token, call, ret, resign int64) []Op {
		return []Op{
			{Proc: proc, Kind: KindElection, Name: "e", Op: OpAcquire, Hold: hold, Token: token, Call: call, Ret: ret, OK: true},
			{Proc: proc, Kind: KindElection, Name: "e", Op: OpRelease, Hold: hold, Call: resign, Ret: resign + ms, OK: true},
		}
	}
	view := func(call, ret, token int64, leader bool) Op {
		return Op{Proc: 9, G: 1, Kind: KindElection, Name: "e", Op: OpView, Call: call, Ret: ret, Token: token, OK: leader}
	}
	clean := append(append(term(0, 1, 10, 0, ms, 5*ms), term(1, 1, 11, 2*ms, 7*ms, 9*ms)...),
		view(0, 2*ms, 10, true), view(2*ms, 8*ms, 11, true), view(8*ms, 12*ms, 11, false))
	for _, c := range []struct {
		what string
		ops  []Op
		want string
	}{
		{"clean", clean, ""},
		{"tokens", append(term(0, 1, 10, 0, ms, 5*ms), term(1, 1, 9, 6*ms, 7*ms, 9*ms)...), "tokens not increasing"},
		{"back in term", append(append([]Op{}, clean...), view(12*ms, 13*ms, 10, true)), "view of term 10 after term 11"},
		{"older than acquired", append(append([]Op{}, clean[:4]...), view(8*ms, 9*ms, 10, false)), "read after term 11 was acquired"},
		{"resigned", append(append([]Op{}, clean[:2]...), view(7*ms, 8*ms, 10, true)), "resignation was confirmed"},
	} {
		r := Check(c.ops, Spec{})
		if c.want == "" {
			require.Zero(t, r.Violations, "%s: %v", c.what, r.Details)
			continue
		}
		require.Positive(t, r.Violations, c.what)
		require.True(t, strings.Contains(strings.Join(r.Details, "\n"), c.want), "%s: %v", c.what, r.Details)
	}
}
