package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/identity"
	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// cliRun is one run of the holdfast command.
type cliRun struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// statusCLI runs the holdfast command with args, stdin /dev/null (not a
// terminal), and returns what it printed and its exit code.
func statusCLI(t testing.TB, args ...string) cliRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, holdfastBin(t), args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Run()
	r := cliRun{stdout: out.String(), stderr: errOut.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running holdfast %v: %v", args, err)
	}
	return r
}

// sharedURL is the --redis URL of the shared test server.
func sharedURL(t testing.TB) string { return "redis://" + redistest.Shared(t).Addr }

// cliStatus is one object of "holdfast status --json", with every documented
// field (decoding fails on any other).
type cliStatus struct {
	Name             string       `json:"name"`
	Kind             string       `json:"kind"`
	RedisType        string       `json:"redis_type"`
	Mode             string       `json:"mode"`
	TTLMillis        int64        `json:"ttl_ms"`
	Holders          []cliHolder  `json:"holders"`
	Channel          string       `json:"channel"`
	Subscribers      int64        `json:"subscribers"`
	Queue            []cliQueued  `json:"queue"`
	FencingToken     *int64       `json:"fencing_token"`
	Value            string       `json:"value"`
	AcquiredPermits  int64        `json:"acquired_permits"`
	LatchChannel     string       `json:"latch_channel"`
	LatchSubscribers int64        `json:"latch_subscribers"`
	SeenAs           string       `json:"seen_as"`
	Election         *cliElection `json:"election"`
}

// cliElection is an election's part of cliStatus.
type cliElection struct {
	Leader          string `json:"leader"`
	Value           string `json:"value"`
	Term            int64  `json:"term"`
	SinceUnixMillis int64  `json:"since_unix_ms"`
	StaleRecord     bool   `json:"stale_record"`
	Candidates      int64  `json:"candidates"`
	Followers       int64  `json:"followers"`
	Channel         string `json:"election_channel"`
	Record          string `json:"leader_record"`
	Proclaimed      bool   `json:"proclaimed"`
	LeaseLeftMillis int64  `json:"lease_left_ms"`
}

// cliHolder is a holder in cliStatus.
type cliHolder struct {
	Field        string `json:"field"`
	ClientID     string `json:"client_id"`
	OwnerID      string `json:"owner_id"`
	Side         string `json:"side"`
	Count        int64  `json:"count"`
	ReadTimeouts *struct {
		Keys         int   `json:"keys"`
		MinTTLMillis int64 `json:"min_ttl_ms"`
	} `json:"read_timeouts"`
	Holder     *cliRecord `json:"holder"`
	HolderNote string     `json:"holder_note"`
}

// cliQueued is a fair lock's waiter in cliStatus.
type cliQueued struct {
	Field              string     `json:"field"`
	ClientID           string     `json:"client_id"`
	OwnerID            string     `json:"owner_id"`
	DeadlineUnixMillis *int64     `json:"deadline_unix_ms"`
	DeadlineInMillis   *int64     `json:"deadline_in_ms"`
	Channel            string     `json:"channel"`
	Subscribers        int64      `json:"subscribers"`
	Waiter             *cliRecord `json:"waiter"`
	WaiterNote         string     `json:"waiter_note"`
}

// statusJSON runs "holdfast status --json" on the shared server with args
// (names, flags) and decodes its output; it must exit 0.
func statusJSON(t testing.TB, args ...string) []cliStatus {
	t.Helper()
	r := statusCLI(t, append([]string{"status", "--json", "--redis", sharedURL(t)}, args...)...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	var list []cliStatus
	require.NoError(t, dec.Decode(&list), r.stdout)
	return list
}

// statusOne is statusJSON of the single name.
func statusOne(t testing.TB, name string) cliStatus {
	t.Helper()
	list := statusJSON(t, name)
	require.Len(t, list, 1)
	require.Equal(t, name, list[0].Name)
	return list[0]
}

// statusHuman runs "holdfast status" on the shared server with args; it must
// exit 0.
func statusHuman(t testing.TB, args ...string) string {
	t.Helper()
	r := statusCLI(t, append([]string{"status", "--redis", sharedURL(t)}, args...)...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	return r.stdout
}

// TestCLIStatusMutex: a holdfast Mutex shows its holder's client id (the
// Client's ID) and hold count, 1 then 2 after a reentrant hold, its lease and
// channel; after the unlocks the name is free.
func TestCLIStatusMutex(t *testing.T) {
	_, c, name := setup(t)
	ctx := rlock.WithOwner(testCtx(t, 30*time.Second))
	m := c.NewMutex(name)
	outer, err := m.Lock(ctx)
	require.NoError(t, err)
	st := statusOne(t, name)
	require.Equal(t, "lock", st.Kind)
	require.Equal(t, "hash", st.RedisType)
	require.Len(t, st.Holders, 1)
	h := st.Holders[0]
	require.Equal(t, c.ID(), h.ClientID)
	require.Equal(t, c.ID()+":"+h.OwnerID, h.Field)
	require.EqualValues(t, 1, h.Count)
	require.Greater(t, st.TTLMillis, int64(0))
	require.LessOrEqual(t, st.TTLMillis, int64(30_000))
	require.Equal(t, lua.ChannelName(name), st.Channel)

	inner, err := m.Lock(ctx)
	require.NoError(t, err)
	st = statusOne(t, name)
	require.EqualValues(t, 2, st.Holders[0].Count)
	out := statusHuman(t, name)
	require.Contains(t, out, name+": locked")
	require.Regexp(t, "held by "+holderPattern(c.ID(), h.OwnerID)+"  count 2", out)
	require.Contains(t, out, "waiters:  0 subscribed to "+lua.ChannelName(name))

	require.NoError(t, inner.Unlock(ctx))
	require.NoError(t, outer.Unlock(ctx))
	st = statusOne(t, name)
	require.Equal(t, "free", st.Kind)
	require.EqualValues(t, -2, st.TTLMillis)
	require.Empty(t, st.Holders)
}

// TestCLIStatusJavaLock: a lock hash written as Redisson writes it (field
// "<uuid>:<thread id>", PEXPIRE) shows as a holdfast lock does.
func TestCLIStatusJavaLock(t *testing.T) {
	rdb, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	const javaID = "3edaecd7-8b5a-4c47-bdc6-fff775044369"
	require.NoError(t, rdb.HSet(ctx, name, javaID+":82", 1).Err())
	require.NoError(t, rdb.PExpire(ctx, name, 30*time.Second).Err())
	goName := name + ":go"
	l, err := c.NewMutex(goName).Lock(ctx)
	require.NoError(t, err)
	defer func() { _ = l.Unlock(ctx) }()

	list := statusJSON(t, name, goName)
	require.Len(t, list, 2)
	java, gost := list[0], list[1]
	require.Equal(t, []cliHolder{{Field: javaID + ":82", ClientID: javaID, OwnerID: "82", Count: 1, HolderNote: cliNoRecord}}, java.Holders,
		"a Java holder writes no record: holder null, and the note says why")
	require.Equal(t, gost.Kind, java.Kind)
	require.Equal(t, gost.RedisType, java.RedisType)
	require.Equal(t, lua.ChannelName(name), java.Channel)
	require.Greater(t, java.TTLMillis, int64(0))
	require.LessOrEqual(t, java.TTLMillis, int64(30_000))
	require.Contains(t, statusHuman(t, name), "held by client "+javaID+", owner 82 (no record)  count 1\n  "+cliNoRecord+"\n")
}

// TestCLIStatusFairQueue: a held fair lock with two waiters of two clients shows
// the queue in arrival order, each with its deadline and its own channel's
// subscription.
func TestCLIStatusFairQueue(t *testing.T) {
	rdb, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	held, err := c.NewFairMutex(name).Lock(ctx)
	require.NoError(t, err)
	defer func() { _ = held.Unlock(ctx) }()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var waiters []*rlock.Client
	for i := range 2 {
		w := newClient(t, redistest.Shared(t).Client(t))
		defer stopWaiter(cancel, lockAsync(wctx, w.NewFairMutex(name)))
		waiters = append(waiters, w)
		require.Eventually(t, func() bool { return rdb.LLen(ctx, lua.QueueName(name)).Val() == int64(i+1) },
			10*time.Second, 5*time.Millisecond)
	}
	var st cliStatus
	require.Eventually(t, func() bool {
		st = statusOne(t, name)
		return len(st.Queue) == 2 && st.Queue[0].Subscribers == 1 && st.Queue[1].Subscribers == 1
	}, 10*time.Second, 20*time.Millisecond, "waiters subscribed to their channels")
	require.Equal(t, "fair_lock", st.Kind)
	require.Equal(t, c.ID(), st.Holders[0].ClientID)
	for i, q := range st.Queue {
		require.Equal(t, waiters[i].ID(), q.ClientID, "queue position %d", i)
		require.Equal(t, lua.WaiterChannel(name, q.Field), q.Channel)
		require.NotNil(t, q.DeadlineInMillis)
		require.Greater(t, *q.DeadlineInMillis, int64(0))
	}
	require.Less(t, *st.Queue[0].DeadlineUnixMillis, *st.Queue[1].DeadlineUnixMillis)
	out := statusHuman(t, name)
	require.Contains(t, out, name+": fair lock, locked")
	require.Contains(t, out, "queue:    2 waiting")
	require.Regexp(t, `1\. `+holderPattern(waiters[0].ID(), st.Queue[0].OwnerID), out)
	require.Regexp(t, `2\. `+holderPattern(waiters[1].ID(), st.Queue[1].OwnerID), out)
}

// TestCLIStatusRWLock: two readers show in read mode with their timeout keys;
// then a writer shows in write mode with the ":write" field.
func TestCLIStatusRWLock(t *testing.T) {
	_, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	rw := c.NewRWMutex(name)
	var reads []*rlock.Lease
	for range 2 {
		l, err := rw.ReadLock().Lock(rlock.WithOwner(ctx))
		require.NoError(t, err)
		reads = append(reads, l)
	}
	st := statusOne(t, name)
	require.Equal(t, "rw_lock", st.Kind)
	require.Equal(t, "read", st.Mode)
	require.Equal(t, lua.RWChannelName(name), st.Channel)
	require.Len(t, st.Holders, 2)
	for _, h := range st.Holders {
		require.Equal(t, "read", h.Side)
		require.Equal(t, c.ID(), h.ClientID)
		require.EqualValues(t, 1, h.Count)
		require.NotNil(t, h.ReadTimeouts)
		require.Equal(t, 1, h.ReadTimeouts.Keys)
		require.Greater(t, h.ReadTimeouts.MinTTLMillis, int64(0))
	}
	require.Regexp(t, "read   held by "+holderPattern(c.ID(), `\d+`), statusHuman(t, name))
	for _, l := range reads {
		require.NoError(t, l.Unlock(ctx))
	}

	w, err := rw.WriteLock().Lock(ctx)
	require.NoError(t, err)
	defer func() { _ = w.Unlock(ctx) }()
	st = statusOne(t, name)
	require.Equal(t, "write", st.Mode)
	require.Len(t, st.Holders, 1)
	require.Equal(t, "write", st.Holders[0].Side)
	require.True(t, strings.HasSuffix(st.Holders[0].Field, ":write"), st.Holders[0].Field)
	require.Equal(t, c.ID(), st.Holders[0].ClientID)
	require.NotContains(t, st.Holders[0].OwnerID, ":")
}

// TestCLIStatusFenced: a fenced lock shows its latest token, which stays after
// the unlock.
func TestCLIStatusFenced(t *testing.T) {
	_, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	l, err := c.NewFencedMutex(name).Lock(ctx)
	require.NoError(t, err)
	st := statusOne(t, name)
	require.Equal(t, "lock", st.Kind)
	require.NotNil(t, st.FencingToken)
	require.Equal(t, l.Token(), *st.FencingToken)
	require.NoError(t, l.Unlock(ctx))
	st = statusOne(t, name)
	require.Equal(t, "free", st.Kind)
	require.Equal(t, l.Token(), *st.FencingToken)
	require.Contains(t, statusHuman(t, name), "fencing token: "+strconv.FormatInt(l.Token(), 10))
}

// TestCLIStatusNotALock: a free name, a string and a hash of another shape are
// read (exit 0) and told apart; an integer string may be a semaphore or latch.
func TestCLIStatusNotALock(t *testing.T) {
	rdb, _, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	free, str, hash, counter := name+":free", name+":str", name+":hash", name+":sem"
	require.NoError(t, rdb.Set(ctx, str, "hello", 0).Err())
	require.NoError(t, rdb.HSet(ctx, hash, "name", "bob").Err())
	require.NoError(t, rdb.Set(ctx, counter, "5", 0).Err())
	list := statusJSON(t, free, str, hash, counter)
	require.Len(t, list, 4)
	require.Equal(t, "free", list[0].Kind)
	require.Equal(t, "none", list[0].RedisType)
	require.Equal(t, []string{"not_a_lock", "string"}, []string{list[1].Kind, list[1].RedisType})
	require.Equal(t, []string{"not_a_lock", "hash"}, []string{list[2].Kind, list[2].RedisType})
	require.Equal(t, "semaphore_or_latch", list[3].Kind)
	require.Equal(t, "5", list[3].Value)
	out := statusHuman(t, free, str, counter)
	require.Contains(t, out, free+": free")
	require.Contains(t, out, str+": not a lock: the key holds a string")
	require.Contains(t, out, counter+": semaphore or latch: value 5")
}

// TestCLIStatusScan: --scan shows the lock objects among the keys matching a
// pattern, found through their own key or their auxiliary keys, and leaves other
// keys out.
func TestCLIStatusScan(t *testing.T) {
	rdb, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	lock, rw, fenced := name+":lock", name+":rw", name+":fenced"
	l, err := c.NewMutex(lock).Lock(ctx)
	require.NoError(t, err)
	defer func() { _ = l.Unlock(ctx) }()
	r, err := c.NewRWMutex(rw).ReadLock().Lock(ctx)
	require.NoError(t, err)
	defer func() { _ = r.Unlock(ctx) }()
	f, err := c.NewFencedMutex(fenced).Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, f.Unlock(ctx)) // free, token left
	require.NoError(t, rdb.Set(ctx, name+":str", "x", 0).Err())
	require.NoError(t, rdb.HSet(ctx, name+":hash", "a", "b").Err())

	names := func(list []cliStatus) []string {
		var out []string
		for _, st := range list {
			out = append(out, st.Name)
		}
		return out
	}
	// Matching the names: the lock hashes; the fenced lock's token does not match.
	require.Equal(t, []string{lock, rw}, names(statusJSON(t, "--scan", name+":*")))
	// Matching the auxiliary keys too: the fenced lock through its token.
	require.Equal(t, []string{fenced, lock, rw}, names(statusJSON(t, "--scan", "*"+name+"*")))
	out := statusHuman(t, "--scan", "*"+name+"*")
	require.Contains(t, out, lock+": locked")
	require.Contains(t, out, rw+": read/write lock, held in read mode")
	require.NotContains(t, out, name+":str")
	require.Contains(t, statusHuman(t, "--scan", name+":nothing*"), "no lock objects match")
}

// TestCLIStatusWaiters: a Go waiter blocked in Lock shows as a subscriber of the
// lock's channel.
func TestCLIStatusWaiters(t *testing.T) {
	rdb, _, name, held := setupHeld(t)
	ctx := testCtx(t, 30*time.Second)
	defer func() { _ = held.Unlock(ctx) }()
	w := newClient(t, redistest.Shared(t).Client(t))
	wctx, cancel := context.WithCancel(ctx)
	defer stopWaiter(cancel, lockAsync(wctx, w.NewMutex(name)))
	awaitSubscribers(t, rdb, lua.ChannelName(name), 1)
	require.EqualValues(t, 1, statusOne(t, name).Subscribers)
	require.Contains(t, statusHuman(t, name), "waiters:  1 subscribed to "+lua.ChannelName(name))
}

// stopWaiter ends a wait started by rwLockAsync: it cancels it, waits for its
// outcome and unlocks the lease it may have got meanwhile. Deferred after the
// holder's unlock, it runs before it, so that no waiter takes the lock then.
func stopWaiter(cancel context.CancelFunc, ch <-chan leaseResult) {
	cancel()
	if r := <-ch; r.err == nil {
		_ = r.v.Unlock(context.Background())
	}
}

// TestCLIUnlockForce: unlock --force releases each kind of lock held by another
// client with that kind's ForceUnlock, says who held it, and the waiter blocked
// on it gets the lock well before the holder's 30 s lease would have run out.
// Stdin is not a terminal: no confirmation is asked.
func TestCLIUnlockForce(t *testing.T) {
	for _, tc := range []struct {
		name           string
		holder, waiter func(c *rlock.Client, name string) rlock.Locker
		channel        func(rdb *redis.Client, name string) string
		says           string
	}{
		{"Mutex", mutexOf, mutexOf, func(_ *redis.Client, n string) string { return lua.ChannelName(n) }, "announced the release"},
		{"FairMutex", fairOf, fairOf, fairHeadChannel, "woke the head of the queue"},
		{"WriteThenReader", writeOf, readOf, func(_ *redis.Client, n string) string { return lua.RWChannelName(n) }, "woke every waiter"},
		{"ReadThenWriter", readOf, writeOf, func(_ *redis.Client, n string) string { return lua.RWChannelName(n) }, "announced the release"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb, c, name := setup(t)
			ctx := testCtx(t, 30*time.Second)
			_, err := tc.holder(c, name).Lock(ctx)
			require.NoError(t, err)
			w := newClient(t, redistest.Shared(t).Client(t))
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			ch := lockAsync(wctx, tc.waiter(w, name))
			var channel string
			require.Eventually(t, func() bool { channel = tc.channel(rdb, name); return channel != "" },
				10*time.Second, 5*time.Millisecond)
			awaitSubscribers(t, rdb, channel, 1)

			r := statusCLI(t, "unlock", "--force", "--redis", sharedURL(t), name)
			require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
			require.Contains(t, r.stdout, "force-released "+name)
			require.Regexp(t, holderPattern(c.ID(), `\d+`), r.stdout)
			require.Contains(t, r.stdout, tc.says)
			require.NotContains(t, r.stderr, "[y/N]")
			got := awaitAsync(t, ch, 10*time.Second, "the waiter, after unlock --force")
			require.NoError(t, got.err)
			require.NoError(t, got.v.Unlock(ctx))
		})
	}
}

// Lock kinds for TestCLIUnlockForce.
func mutexOf(c *rlock.Client, n string) rlock.Locker { return c.NewMutex(n) }
func fairOf(c *rlock.Client, n string) rlock.Locker  { return c.NewFairMutex(n) }
func readOf(c *rlock.Client, n string) rlock.Locker  { return c.NewRWMutex(n).ReadLock() }
func writeOf(c *rlock.Client, n string) rlock.Locker { return c.NewRWMutex(n).WriteLock() }

// fairHeadChannel is the channel of the fair lock's first waiter, "" while none
// is queued.
func fairHeadChannel(rdb *redis.Client, name string) string {
	head, err := rdb.LIndex(context.Background(), lua.QueueName(name), 0).Result()
	if err != nil {
		return ""
	}
	return lua.WaiterChannel(name, head)
}

// TestCLIUnlockRefusals: without --force nothing is released (64); a free name
// is "not locked" (0, so scripts may run unlock again); a key that is not a lock
// is left alone (65).
func TestCLIUnlockRefusals(t *testing.T) {
	rdb, _, name, l := setupHeld(t)
	ctx := testCtx(t, 30*time.Second)
	defer func() { _ = l.Unlock(ctx) }()
	url := sharedURL(t)

	r := statusCLI(t, "unlock", "--redis", url, name)
	require.Equal(t, 64, r.code)
	require.Contains(t, r.stderr, "without --force")
	require.EqualValues(t, 1, rdb.Exists(ctx, name).Val(), "the lock is still held")

	r = statusCLI(t, "unlock", "--force", "--redis", url, name+":free")
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	require.Contains(t, r.stdout, "is not locked")

	require.NoError(t, rdb.Set(ctx, name+":str", "x", 0).Err())
	r = statusCLI(t, "unlock", "--force", "--redis", url, name+":str")
	require.Equal(t, 65, r.code)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
	require.Equal(t, "holdfast unlock: "+name+":str: not a lock: the key holds a string; nothing released\n", r.stderr)
	require.Equal(t, "x", rdb.Get(ctx, name+":str").Val())

	r = statusCLI(t, "unlock", "--force", "--redis", url)
	require.Equal(t, 64, r.code)
	r = statusCLI(t, "status", "--redis", url)
	require.Equal(t, 64, r.code)
}

// TestCLIStatusUnreachable: a server that does not answer (a closed port) is
// reported in one line with 69, within the connect timeout; a URL that cannot
// be parsed is a usage error (64).
func TestCLIStatusUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	for _, args := range [][]string{{"status", "x"}, {"status", "--json", "--scan", "*"}, {"unlock", "--force", "x"}} {
		r := statusCLI(t, append(args, "--redis", "redis://"+addr, "--connect-timeout", "2s")...)
		require.Equal(t, 69, r.code, "%v: %s", args, r.stderr)
		require.Equal(t, 1, strings.Count(r.stderr, "\n"), "%v: %q", args, r.stderr)
		require.Contains(t, r.stderr, "cannot reach Redis")
		require.Empty(t, r.stdout)
		require.Less(t, r.took, 6*time.Second, "%v", args)
	}
	r := statusCLI(t, "status", "--redis", "http//nowhere", "x")
	require.Equal(t, 64, r.code)
	require.Contains(t, r.stderr, "bad --redis URL")
}

// TestCLIStatusCluster: on a Redis Cluster, status reads locks in every shard,
// counts their waiters' subscriptions (sharded, on the slot's primary; classic
// on Redis 6.2, on every node), --scan
// finds them on every primary, and unlock --force wakes a waiter.
func TestCLIStatusCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	ctx := testCtx(t, 30*time.Second)
	holderC, waiterC := newClient(t, cl.Client(t)), newClient(t, cl.Client(t))
	prefix := redistest.Name(t)
	names, waits := clusterHeldAndAwaited(t, cl, holderC, waiterC, prefix)
	urls := make([]string, len(cl.Addrs()))
	for i, a := range cl.Addrs() {
		urls[i] = "redis://" + a
	}
	seeds := strings.Join(urls, ",")
	r := statusCLI(t, append([]string{"status", "--json", "--redis", seeds}, names...)...)
	require.Equal(t, 0, r.code, r.stderr)
	var list []cliStatus
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	require.Len(t, list, len(names))
	for _, st := range list {
		require.Equal(t, "lock", st.Kind, st.Name)
		require.Equal(t, holderC.ID(), st.Holders[0].ClientID, st.Name)
		require.EqualValues(t, 1, st.Subscribers, st.Name)
	}

	r = statusCLI(t, "status", "--redis", seeds, "--scan", prefix+":*")
	require.Equal(t, 0, r.code, r.stderr)
	for _, name := range names {
		require.Contains(t, r.stdout, name+": locked")
	}

	r = statusCLI(t, "unlock", "--force", "--redis", seeds, names[0])
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "(1 subscribed)")
	got := awaitAsync(t, waits[names[0]], 10*time.Second, "the waiter, after unlock --force")
	require.NoError(t, got.err)
	require.NoError(t, got.v.Unlock(ctx))
}

// clusterHeldAndAwaited takes, with holder, a lock in each shard of cl, named
// after prefix, and starts a waiter of waiter on each; it returns once every
// waiter's subscription is counted (SSUBSCRIBE on the slot's primary; SUBSCRIBE
// on Redis 6.2). The waits end with the test.
func clusterHeldAndAwaited(t *testing.T, cl *redistest.Cluster, holder, waiter *rlock.Client, prefix string) ([]string, map[string]<-chan leaseResult) {
	t.Helper()
	rdb := cl.Client(t)
	ctx := testCtx(t, 30*time.Second)
	wctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	var names []string
	waits := map[string]<-chan leaseResult{}
	for _, shard := range clusterNames(t, cl, rdb, prefix) {
		name := shard[0]
		_, err := holder.NewMutex(name).Lock(ctx)
		require.NoError(t, err)
		waits[name] = lockAsync(wctx, waiter.NewMutex(name))
		channel := lua.ChannelName(name)
		ps := clusterPubSubOf(t, cl)
		require.Eventually(t, func() bool { n, _ := ps.listeners(ctx, channel); return n == 1 },
			10*time.Second, 5*time.Millisecond, "the waiter listens to %s by %s", channel, ps)
		names = append(names, name)
	}
	return names, waits
}

// TestCLIStatusHelp: "status -h" and "unlock -h" say first what the command
// does, then give the synopsis that docs/cli.md gives, then the flags, written
// --flag as docs/cli.md writes them.
func TestCLIStatusHelp(t *testing.T) {
	doc, err := os.ReadFile("../docs/cli.md")
	require.NoError(t, err)
	for _, tc := range []struct {
		cmd, about string
		synopsis   []string
		flags      []string
	}{
		{"status", "Shows what is at each lock NAME: the kind of lock, who holds it,",
			[]string{"holdfast status [flags] NAME...", "holdfast status [flags] --scan PATTERN [NAME...]"},
			[]string{"--json", "--scan PATTERN", "--connect-timeout DURATION"}},
		{"unlock", "Force-releases the lock NAME whoever holds it, and wakes its waiters",
			[]string{"holdfast unlock --force [--yes] [flags] NAME"},
			[]string{"--force", "--yes", "--connect-timeout DURATION"}},
	} {
		r := statusCLI(t, tc.cmd, "-h")
		require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
		require.Empty(t, r.stderr)
		require.True(t, strings.HasPrefix(r.stdout, tc.about), "%s -h:\n%s", tc.cmd, r.stdout)
		about, rest, _ := strings.Cut(r.stdout, "\n\n")
		require.NotContains(t, about, "usage:", "the description comes first")
		require.True(t, strings.HasPrefix(rest, "usage: "+tc.synopsis[0]+"\n"), "%s -h:\n%s", tc.cmd, r.stdout)
		for _, s := range tc.synopsis {
			require.Contains(t, rest, s)
			require.Contains(t, string(doc), "\n"+s+"\n", "docs/cli.md gives the synopsis of %s -h", tc.cmd)
		}
		_, flags, ok := strings.Cut(rest, "\nflags:\n")
		require.True(t, ok, "%s -h:\n%s", tc.cmd, r.stdout)
		for _, f := range tc.flags {
			require.Contains(t, flags, "  "+f+"\n", "the help writes --flag")
			require.Contains(t, string(doc), "`"+f+"`", "docs/cli.md writes the flag as the help does")
		}
		require.NotRegexp(t, `(?m)^  -[a-z][a-z]`, flags, "no long flag with one dash")
	}
}

// TestCLIStatusRefusesLockRefusedNames: a name that "holdfast lock" refuses
// (its keys could not share a cluster slot) is refused by status and unlock
// too, with the same message and exit 64, and nothing is read or written.
func TestCLIStatusRefusesLockRefusedNames(t *testing.T) {
	rdb, _, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	url := sharedURL(t)
	for _, bad := range []string{name + "{", "a{b", name + ":{}:x"} {
		lock := statusCLI(t, "lock", "--redis", url, bad, "--", "echo", "never")
		require.Equal(t, 64, lock.code, "lock: %s", lock.stderr)
		require.Empty(t, lock.stdout)
		msg, ok := strings.CutPrefix(lock.stderr, "holdfast lock: ")
		require.True(t, ok, lock.stderr)
		require.Contains(t, msg, "invalid argument")
		require.Equal(t, 1, strings.Count(msg, "\n"), msg)
		for _, args := range [][]string{{"status", bad}, {"status", "--json", name, bad}, {"unlock", "--force", bad}} {
			r := statusCLI(t, append(args, "--redis", url)...)
			require.Equal(t, 64, r.code, "%q: %s", args, r.stderr)
			require.Equal(t, "holdfast "+args[0]+": "+msg, r.stderr, "%q", args)
			require.Empty(t, r.stdout, "%q", args)
		}
		require.Zero(t, rdb.Exists(ctx, bad).Val(), "nothing written at %q", bad)
	}
}

// Who holds a lock, by its client's record (identity), in "holdfast status",
// the busy and waiting lines of "holdfast lock" and "holdfast elect"; and the
// command's rough edges: the wording of its errors and refusals.

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
