package integration

// Who holds a lock, by its client's record (identity), in "holdfast status",
// the busy and waiting lines of "holdfast lock" and "holdfast elect"; and the
// command's rough edges of issue 37, item 5.

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/identity"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// cliRecord is a holder's "holder" (a queued waiter's "waiter") in cliStatus.
type cliRecord struct {
	Service string    `json:"service"`
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Version string    `json:"version"`
	Started time.Time `json:"started"`
}

// cliNoRecord is the note of a holder without a record.
const cliNoRecord = "no record: a client that is gone, or one that does not write one (Redisson/Java, an older holdfast)"

// shortClient is how the command abbreviates a client id it names by its record.
func shortClient(id string) string { return id[:8] + "…" }

// holderPattern is a regular expression matching how the command names the
// holder of the owner field client:owner (owner itself a pattern): by its
// client's record, "svc on host, pid N, since T (client 1a2b3c4d…, owner O)",
// or without one by its ids, "client ID, owner O (no record)" or "…; no
// record: …". Whether an in-process rlock client writes a record is rlock's
// business, not the command's: both forms are accepted.
func holderPattern(client, owner string) string {
	return `(?:\S.*, pid \d+, since [0-9:-]+(?: [0-9:]+)? \(client ` + regexp.QuoteMeta(shortClient(client)) + `, owner ` + owner + `\)` +
		`|client ` + regexp.QuoteMeta(client) + `, owner ` + owner + `(?: \(no record\)|; no record))`
}

// holderOf is holderPattern of a lease's holder, a client of c.
func holderOf(c *rlock.Client, l *rlock.Lease) string {
	return holderPattern(c.ID(), regexp.QuoteMeta(strings.TrimPrefix(l.Holder(), c.ID()+":")))
}

// holderName is the exact text status shows for the holder client:owner, by
// the record the client has in Redis now, if any.
func holderName(t testing.TB, rdb redis.Cmdable, client, owner string) string {
	t.Helper()
	recs, err := identity.Read(context.Background(), rdb, client)
	require.NoError(t, err)
	if r, ok := recs[client]; ok {
		return r.String() + " (client " + shortClient(client) + ", owner " + owner + ")"
	}
	return "client " + client + ", owner " + owner + " (no record)"
}

// putRecord writes the record r as a live client keeps it (identity.Key, a
// JSON string, time to live identity.Life).
func putRecord(t testing.TB, rdb redis.Cmdable, r identity.Record) {
	t.Helper()
	b, err := json.Marshal(r)
	require.NoError(t, err)
	require.NoError(t, rdb.Set(context.Background(), identity.Key(r.Client), b, identity.Life).Err())
	t.Cleanup(func() { rdb.Del(context.Background(), identity.Key(r.Client)) })
}

// TestCLIStatusNamesHolder: a lock whose holder's client has a record shows
// it ("orders-svc on host-3, pid 4121, since …") in status, status --json
// (the "holder" object), status --watch --json and the busy line of holdfast
// lock; one without a record shows "holder": null and the note saying why,
// and a record key holding something else is a note too, not a failure.
func TestCLIStatusNamesHolder(t *testing.T) {
	rdb, _, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	const live, gone, broken = "1a2b3c4d-0000-4000-8000-000000000001", "1a2b3c4d-0000-4000-8000-000000000002", "1a2b3c4d-0000-4000-8000-000000000003"
	started := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	rec := identity.Record{Client: live, Service: "orders-svc", Host: "host-3", PID: 4121, Version: "v0.9.0", Started: started}
	putRecord(t, rdb, rec)
	require.NoError(t, rdb.Set(ctx, identity.Key(broken), "not json", time.Minute).Err())
	t.Cleanup(func() { rdb.Del(context.Background(), identity.Key(broken)) })
	held, noRec, bad := name, name+":gone", name+":broken"
	require.NoError(t, rdb.HSet(ctx, held, live+":7", 1).Err())
	require.NoError(t, rdb.HSet(ctx, noRec, gone+":8", 1).Err())
	require.NoError(t, rdb.HSet(ctx, bad, broken+":9", 1).Err())
	for _, n := range []string{held, noRec, bad} {
		require.NoError(t, rdb.PExpire(ctx, n, 30*time.Second).Err())
	}

	list := statusJSON(t, held, noRec, bad)
	require.Len(t, list, 3)
	h := list[0].Holders[0]
	require.Equal(t, &cliRecord{Service: "orders-svc", Host: "host-3", PID: 4121, Version: "v0.9.0", Started: started.UTC()}, normalized(h.Holder))
	require.Empty(t, h.HolderNote)
	require.Nil(t, list[1].Holders[0].Holder)
	require.Equal(t, cliNoRecord, list[1].Holders[0].HolderNote)
	require.Nil(t, list[2].Holders[0].Holder)
	require.Contains(t, list[2].Holders[0].HolderNote, "record not read: "+identity.Key(broken)+" holds something else")
	r := statusCLI(t, "status", "--json", "--redis", sharedURL(t), noRec)
	require.Contains(t, r.stdout, `"holder": null`, "null, not left out")

	named := "held by " + rec.String() + " (client 1a2b3c4d…, owner 7)"
	out := statusHuman(t, held, noRec)
	require.Contains(t, out, held+": locked")
	require.Contains(t, out, "\n    "+named+"  count 1\n")
	require.Contains(t, out, "\n    held by client "+gone+", owner 8 (no record)  count 1\n  "+cliNoRecord+"\n")

	p := startLockCLIURL(t, sharedURL(t), "-n", held, "--", "echo", "never")
	require.Equal(t, 1, p.wait(t))
	require.Contains(t, p.stderr.String(), `"`+held+`" is busy: `+named+", lease ")
	p = startLockCLIURL(t, sharedURL(t), "-n", noRec, "--", "echo", "never")
	require.Equal(t, 1, p.wait(t))
	require.Contains(t, p.stderr.String(), "is busy: held by client "+gone+", owner 8; "+cliNoRecord+", lease ")

	w := startWatch(t, sharedURL(t), "--json", "--interval", "100ms", held)
	line := w.waitJSON(t, "the holder's record", func(l cliWatchLine) bool {
		return len(l.Objects) == 1 && len(l.Objects[0].Holders) == 1 && l.Objects[0].Holders[0].Holder != nil
	})
	require.Equal(t, "host-3", line.Objects[0].Holders[0].Holder.Host)
	require.Equal(t, 0, w.interrupt(t, nil))
}

// normalized is r with its time in UTC, for comparisons.
func normalized(r *cliRecord) *cliRecord {
	if r == nil {
		return nil
	}
	c := *r
	c.Started = c.Started.UTC()
	return &c
}

// TestCLIWaitOneLine: with -w 1 on a busy lock, holdfast lock and holdfast
// elect print one line, the "still busy" one: the progress line due at the
// same second said the same.
func TestCLIWaitOneLine(t *testing.T) {
	_, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	lease, err := c.NewMutex(name).Lock(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, lease.Unlock(ctx)) }()
	for _, sub := range []string{"lock", "elect"} {
		p := startSessionCLI(t, sub, sharedURL(t), "-w", "1", name, "--", "echo", "never")
		_ = p.stdin.Close()
		require.Equal(t, 1, p.wait(t), p.stderr.String())
		require.Equal(t, 1, strings.Count(p.stderr.String(), "\n"), "%s: one line: %s", sub, p.stderr.String())
		require.Contains(t, p.stderr.String(), "is still busy after 1s: ")
	}
}

// TestCLINotALockOneWording: a key that is not a lock is worded the same by
// status, lock, elect and unlock: "NAME: not a lock: the key holds a string".
func TestCLINotALockOneWording(t *testing.T) {
	rdb, _, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	require.NoError(t, rdb.Set(ctx, name, "x", time.Minute).Err())
	want := name + ": not a lock: the key holds a string"
	require.Contains(t, statusHuman(t, name), want+"\n")
	for _, sub := range []string{"lock", "elect"} {
		code, stderr := runSession(t, sub, "-w", "1", name, "--", "echo", "never")
		require.Equal(t, 65, code, "%s: %s", sub, stderr)
		require.Equal(t, "holdfast "+sub+": "+want+"; left alone\n", stderr)
	}
	r := statusCLI(t, "unlock", "--force", "--redis", sharedURL(t), name)
	require.Equal(t, 65, r.code, r.stderr)
	require.Equal(t, "holdfast unlock: "+want+"; nothing released\n", r.stderr)
	require.Equal(t, "x", rdb.Get(ctx, name).Val(), "left alone")
}

// runSession runs "holdfast sub" on the shared server to its end and returns
// its exit code and stderr.
func runSession(t *testing.T, sub string, args ...string) (int, string) {
	t.Helper()
	p := startSessionCLI(t, sub, sharedURL(t), args...)
	_ = p.stdin.Close()
	return p.wait(t), p.stderr.String()
}

// TestCLIStatusSemaphoreOrLatch: a semaphore whose permits are all free (the
// one holdfast lock --permits made, once its command ended) is an integer:
// status says what that integer can be, and what its channels show; a count
// of 0 is a semaphore's (a latch's key is deleted at 0); an awaited latch is
// seen as one.
func TestCLIStatusSemaphoreOrLatch(t *testing.T) {
	rdb, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	p := startSessionCLI(t, "lock", sharedURL(t), "--permits", "2", name, "--", "true")
	require.Equal(t, 0, p.wait(t), p.stderr.String())
	st := statusOne(t, name)
	require.Equal(t, []string{"semaphore_or_latch", "2", ""}, []string{st.Kind, st.Value, st.SeenAs})
	out := statusHuman(t, name)
	require.Contains(t, out, name+": semaphore or latch: value 2\n")
	require.Contains(t, out, "  reading:  a semaphore with 2 permits free and none acquired, or a countdown latch at count 2: ")

	zero := name + ":zero"
	require.NoError(t, rdb.Set(ctx, zero, "0", time.Minute).Err())
	st = statusOne(t, zero)
	require.Equal(t, []string{"semaphore", "0", lua.SemaphoreChannel(zero)}, []string{st.Kind, st.Value, st.Channel})

	latch := name + ":latch"
	defer awaitedLatch(t, ctx, rdb, c, latch)()
	st = statusOne(t, latch)
	require.Equal(t, []string{"semaphore_or_latch", "latch"}, []string{st.Kind, st.SeenAs})
	require.Contains(t, statusHuman(t, latch), latch+": semaphore or latch: value 2, awaited as a countdown latch\n"+
		"  reading:  a countdown latch at count 2: 1 client(s) await it, none waits for permits\n")
}
