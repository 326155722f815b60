package integration

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/stretchr/testify/require"
)

// "holdfast elect" and the election part of "holdfast status".

// electScript prints the term's token and value, then waits for stdin to
// close.
const electScript = `echo "lead $HOLDFAST_TOKEN $HOLDFAST_OWNER"; read x || :`

// TestCLIElect: two "holdfast elect" processes: the first leads and runs its
// command, the second waits (status shows the leader, its value, term and one
// candidate); the first's command ends, it resigns, and the second leads at
// once, in a new term; deleting its lock stops its command, exit 75.
func TestCLIElect(t *testing.T) {
	rdb, _, name := setup(t)
	ctx := testCtx(t, 60*time.Second)
	url := sharedURL(t)
	a := startSessionCLI(t, "elect", url, "--value", "first", name, "--", "sh", "-c", electScript)
	f := strings.Fields(a.next(t))
	require.Len(t, f, 3)
	t1, err := strconv.ParseInt(f[1], 10, 64)
	require.NoError(t, err)

	b := startSessionCLI(t, "elect", url, "--value", "second", "--watchdog-timeout", "600ms", "--kill-grace", "500ms", name, "--",
		"sh", "-c", `trap "echo got TERM; exit 0" TERM; echo "lead $HOLDFAST_TOKEN"; `+loopForever)
	awaitSubscribersAtLeast(t, rdb, lua.ChannelName(name), 1) // the candidate waits
	st := statusOne(t, name)
	require.NotNil(t, st.Election, "status shows the election")
	e := st.Election
	require.Equal(t, "first", e.Value)
	require.Equal(t, t1, e.Term)
	require.Equal(t, f[2], e.Leader, "HOLDFAST_OWNER is the leader's field")
	require.True(t, e.Proclaimed)
	require.EqualValues(t, 1, e.Candidates)
	require.WithinDuration(t, time.Now(), time.UnixMilli(e.SinceUnixMillis), 30*time.Second)
	human := statusHuman(t, name)
	require.Contains(t, human, `election: leader "first", term `+f[1])
	require.Contains(t, human, "candidates: 1 waiting")

	resigned := time.Now()
	require.Equal(t, 0, a.finish(t), a.stderr.String())
	line := b.next(t)
	t.Logf("next leader's command started %v after the first exited", time.Since(resigned))
	t2, err := strconv.ParseInt(strings.TrimPrefix(line, "lead "), 10, 64)
	require.NoError(t, err, line)
	require.Greater(t, t2, t1, "a new term")
	require.Equal(t, "second", statusOne(t, name).Election.Value)

	require.NoError(t, rdb.Del(ctx, name).Err())
	b.expect(t, "got TERM")
	require.Equal(t, exitLockLost, b.wait(t), b.stderr.String())
	require.Contains(t, b.stderr.String(), "holdfast elect: lost "+strconv.Quote(name)+": ")
	st = statusOne(t, name)
	require.Equal(t, "free", st.Kind)
	require.NotNil(t, st.Election)
	require.Empty(t, st.Election.Leader)
	require.True(t, st.Election.StaleRecord, "the lost leader's record is stale, never reported")
	require.Contains(t, statusHuman(t, name), "election: no leader (latest term "+strconv.FormatInt(t2, 10)+")")
}

// TestCLIElectWait: -w bounds the campaign: exit -E's code, the leader named.
func TestCLIElectWait(t *testing.T) {
	_, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	l, err := c.NewElection(name).Campaign(ctx, "incumbent")
	require.NoError(t, err)
	p := startSessionCLI(t, "elect", sharedURL(t), "-w", "300ms", "-E", "3", name, "--", "true")
	_ = p.stdin.Close()
	require.Equal(t, 3, p.wait(t), p.stderr.String())
	require.Contains(t, p.stderr.String(), `led by "incumbent"`)
	require.NoError(t, l.Resign(ctx))
}
