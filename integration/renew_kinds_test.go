package integration

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/watchdog"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// The renewal kinds (lua.RenewalKind) against a real server: a permit of a
// permit-expirable semaphore renewed by a watchdog, and batches that mix a lock
// hold, a read hold and a permit, some of them gone or of another type.

// permitID returns a permit id as Redisson ≥ 3.17 stores it: 16 raw bytes.
func permitID(t testing.TB) string {
	var b [16]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return string(b[:])
}

// addPermit writes the permit id into the semaphore name's timeouts zset with
// expiry now + lease, as Redisson's tryAcquire does (protocol §2.12), and the
// semaphore's available count.
func addPermit(t testing.TB, rdb *redis.Client, name, id string, lease time.Duration) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, rdb.Set(ctx, name, 0, 0).Err())
	require.NoError(t, rdb.ZAdd(ctx, lua.PermitTimeoutsName(name),
		redis.Z{Score: float64(time.Now().Add(lease).UnixMilli()), Member: id}).Err())
}

// permitScore returns the permit's score, 0 when it is not a member.
func permitScore(t testing.TB, rdb *redis.Client, name, id string) int64 {
	t.Helper()
	s, err := rdb.ZScore(context.Background(), lua.PermitTimeoutsName(name), id).Result()
	if err == redis.Nil {
		return 0
	}
	require.NoError(t, err)
	return int64(s)
}

// watchPermit starts a watchdog of the given timeout (a round every third of
// it) and has it renew the permit; losses arrive on the returned channel.
func watchPermit(t testing.TB, rdb *redis.Client, name, id string, timeout time.Duration) (*watchdog.Watchdog, chan error) {
	t.Helper()
	w := watchdog.New(rdb, watchdog.Options{Timeout: timeout})
	t.Cleanup(w.Close)
	lost := make(chan error, 1)
	w.Watch(lua.PermitRenewal(name, id), time.Now().Add(timeout), true, lua.Acks{}, func(err error) { lost <- err })
	return w, lost
}

// TestRenewPermitMovesScore: a watchdog renews a permit by moving its score,
// its expiry in epoch ms on the client's clock, to the round's send time plus
// the timeout, round after round, while the permit is held.
func TestRenewPermitMovesScore(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	name, id := redistest.Name(t), permitID(t)
	const timeout = 900 * time.Millisecond
	addPermit(t, rdb, name, id, timeout)
	_, lost := watchPermit(t, rdb, name, id, timeout)

	last := permitScore(t, rdb, name, id)
	for moves := 0; moves < 4; {
		select {
		case err := <-lost:
			t.Fatalf("permit lost while held: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		s := permitScore(t, rdb, name, id)
		read := time.Now().UnixMilli()
		require.NotZero(t, s, "the renewal removed the permit")
		require.GreaterOrEqual(t, s, last, "a renewal moved the expiry back")
		require.LessOrEqual(t, s, read+timeout.Milliseconds(), "the expiry is past now + timeout")
		if s > last {
			moves++
			last = s
		}
	}
	// Four rounds (a round every 300 ms) outlived the permit's first lease.
	require.Greater(t, last, time.Now().UnixMilli(), "the renewed permit expired")
}

// TestRenewPermitGone: once the permit leaves the zset (released: ZREM; the
// semaphore deleted: DEL) or its score is past (expired, which Redisson
// reclaims), the next round reports ErrGone, well before the local deadline
// would have said ErrNotRenewed, and the permit is not written back.
func TestRenewPermitGone(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(rdb *redis.Client, name, id string) error
	}{
		{"released", func(rdb *redis.Client, name, id string) error {
			return rdb.ZRem(context.Background(), lua.PermitTimeoutsName(name), id).Err()
		}},
		{"deleted", func(rdb *redis.Client, name, _ string) error {
			return rdb.Del(context.Background(), name, lua.PermitTimeoutsName(name)).Err()
		}},
		{"expired", func(rdb *redis.Client, name, id string) error {
			past := float64(time.Now().Add(-time.Second).UnixMilli())
			return rdb.ZAdd(context.Background(), lua.PermitTimeoutsName(name), redis.Z{Score: past, Member: id}).Err()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := redistest.Shared(t).Client(t)
			name, id := redistest.Name(t), permitID(t)
			const timeout = 1500 * time.Millisecond // a round every 500 ms
			addPermit(t, rdb, name, id, timeout)
			_, lost := watchPermit(t, rdb, name, id, timeout)
			first := permitScore(t, rdb, name, id)
			require.Eventually(t, func() bool { return permitScore(t, rdb, name, id) > first },
				2*timeout, 20*time.Millisecond, "no first renewal")

			require.NoError(t, tc.end(rdb, name, id))
			ended := time.Now()
			select {
			case err := <-lost:
				require.ErrorIs(t, err, watchdog.ErrGone)
				require.Less(t, time.Since(ended), timeout, "reported by the deadline, not by a round")
			case <-time.After(3 * timeout):
				t.Fatal("the permit's end was not reported")
			}
			if tc.name == "expired" {
				require.Less(t, permitScore(t, rdb, name, id), time.Now().UnixMilli(), "an expired permit was renewed")
			} else {
				require.Zero(t, permitScore(t, rdb, name, id), "the permit was written back")
			}
		})
	}
}

// TestRenewKindsMixedBatch: one renew.lua call extends a lock hold, a read
// hold (its timeout keys and the lock's key) and a permit whose keys share one
// slot, and answers 0 for the holds that are gone, without touching them.
func TestRenewKindsMixedBatch(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	ctx := context.Background()
	tag := "{" + redistest.Name(t) + "}"
	lockName, rwName, semName := tag+":lock", tag+":rw", tag+":sem"
	field, id := "3edaecd7-8b5a-4c47-bdc6-fff775044369:82", permitID(t)

	require.NoError(t, rdb.HSet(ctx, lockName, field, 1).Err())
	require.NoError(t, rdb.PExpire(ctx, lockName, time.Second).Err())
	require.NoError(t, rdb.HSet(ctx, rwName, "mode", "read", field, 2).Err())
	require.NoError(t, rdb.PExpire(ctx, rwName, time.Second).Err())
	for k := 1; k <= 2; k++ {
		require.NoError(t, rdb.Set(ctx, lua.ReadTimeoutName(rwName, field, k), 1, time.Second).Err())
	}
	addPermit(t, rdb, semName, id, time.Second)

	rw := lua.NewLayoutLock(rwName, lua.LayoutRead)
	holds := []lua.Renewal{
		lua.NewLock(lockName).Renewal(field),
		rw.Renewal(field),
		lua.PermitRenewal(semName, id),
		lua.NewLock(lockName).Renewal("someone:else"), // no such field
		rw.Renewal("someone:else"),
		lua.PermitRenewal(semName, permitID(t)), // no such permit
		lua.PermitRenewal(tag+":nosem", id),     // no such semaphore
	}
	require.Equal(t, lua.RenewReadHold, holds[1].Kind)
	require.Equal(t, tag+":rw", holds[1].Prefix, "the read timeout prefix of a name with a tag is the name")
	for _, h := range holds {
		require.Equal(t, lua.Slot(tag), lua.Slot(h.Key), h.Key)
	}

	now, lease := time.Now(), time.Minute
	ok := renewBatch(t, rdb, holds, now, lease)
	require.Equal(t, []bool{true, true, true, false, false, false, false}, ok)

	long := func(key string) {
		ttl, err := rdb.PTTL(ctx, key).Result()
		require.NoError(t, err)
		require.Greater(t, ttl, 50*time.Second, key)
	}
	long(lockName)
	long(rwName)
	long(lua.ReadTimeoutName(rwName, field, 1))
	long(lua.ReadTimeoutName(rwName, field, 2))
	require.Equal(t, now.UnixMilli()+lease.Milliseconds(), permitScore(t, rdb, semName, id), "the permit's expiry is now + lease")
	n, err := rdb.Exists(ctx, tag+":nosem:timeout").Result()
	require.NoError(t, err)
	require.Zero(t, n, "a renewal created a semaphore's zset")

	// A read hold keeps the lock's key at the longer of its TTL and the lease
	// (other readers'); a lock hold sets it to the lease.
	require.NoError(t, rdb.PExpire(ctx, rwName, 2*time.Hour).Err())
	require.NoError(t, rdb.PExpire(ctx, lockName, 2*time.Hour).Err())
	require.Equal(t, []bool{true, true}, renewBatch(t, rdb, holds[:2], time.Now(), lease))
	ttl, err := rdb.PTTL(ctx, rwName).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, time.Hour, "a read hold's renewal shortened the other readers' lease")
	ttl, err = rdb.PTTL(ctx, lockName).Result()
	require.NoError(t, err)
	require.LessOrEqual(t, ttl, lease)
}

// TestRenewKindsWrongType: a key of another type than its kind expects fails
// only its own entry, in a batch and under a watchdog: the batch's other holds
// are renewed, and the watchdog reports only that hold lost (ErrGone).
func TestRenewKindsWrongType(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	ctx := context.Background()
	tag := "{" + redistest.Name(t) + "}"
	str, hash, zset := tag+":str", tag+":hash", tag+":zset"
	require.NoError(t, rdb.Set(ctx, str, "x", 0).Err())
	require.NoError(t, rdb.HSet(ctx, hash, "f", 1).Err())
	require.NoError(t, rdb.ZAdd(ctx, zset, redis.Z{Score: 1, Member: "f"}).Err())
	semName, id := tag+":sem", permitID(t)
	addPermit(t, rdb, semName, id, time.Second)
	lockName := tag + ":lock"
	require.NoError(t, rdb.HSet(ctx, lockName, "f", 1).Err())

	holds := []lua.Renewal{
		{Kind: lua.RenewLockHold, Key: str, Member: "f"},
		{Kind: lua.RenewReadHold, Key: zset, Member: "f", Prefix: tag},
		{Kind: lua.RenewPermit, Key: hash, Member: "f"},
		{Kind: lua.RenewLockHold, Key: hash, Member: "f"},
		lua.PermitRenewal(semName, id),
		{Kind: lua.RenewLockHold, Key: lockName, Member: "f"},
	}
	require.Equal(t, []bool{false, false, false, true, true, true}, renewBatch(t, rdb, holds, time.Now(), time.Minute))
	v, err := rdb.Get(ctx, str).Result()
	require.NoError(t, err)
	require.Equal(t, "x", v, "the string was touched")

	// Under a watchdog: the permit whose key is a hash is lost, the good one
	// (same slot, same batch) keeps being renewed.
	const timeout = 900 * time.Millisecond
	w := watchdog.New(rdb, watchdog.Options{Timeout: timeout})
	t.Cleanup(w.Close)
	badLost, goodLost := make(chan error, 1), make(chan error, 1)
	w.Watch(lua.Renewal{Kind: lua.RenewPermit, Key: hash, Member: "f"}, time.Now().Add(timeout), true, lua.Acks{}, func(err error) { badLost <- err })
	w.Watch(lua.PermitRenewal(semName, id), time.Now().Add(timeout), true, lua.Acks{}, func(err error) { goodLost <- err })
	select {
	case err := <-badLost:
		require.ErrorIs(t, err, watchdog.ErrGone)
	case <-time.After(3 * timeout):
		t.Fatal("the wrong-type hold was not reported")
	}
	first := permitScore(t, rdb, semName, id)
	require.Eventually(t, func() bool { return permitScore(t, rdb, semName, id) > first }, 3*timeout, 20*time.Millisecond,
		"the good permit is no longer renewed")
	select {
	case err := <-goodLost:
		t.Fatalf("the good permit was lost: %v", err)
	default:
	}
}

// renewBatch sends one renewal batch and returns its per-hold answers.
func renewBatch(t testing.TB, rdb *redis.Client, holds []lua.Renewal, now time.Time, lease time.Duration) []bool {
	t.Helper()
	ctx := context.Background()
	for try := 0; try < 2; try++ {
		pipe := rdb.Pipeline()
		cmd := lua.RenewCmd(ctx, pipe, holds, now, lease, false)
		_, _ = pipe.Exec(ctx)
		ok, err := lua.RenewResult(cmd)
		if lua.IsNoScript(err) && try == 0 {
			require.NoError(t, lua.LoadRenew(ctx, rdb))
			continue
		}
		require.NoError(t, err)
		return ok
	}
	panic("unreachable")
}

// TestCheckKinds: check.lua, the tracker's look at holds, answers per hold
// Gone, NoTimeout or the ms left, for every kind and every way a hold is
// missing, and changes nothing.
func TestCheckKinds(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	ctx := context.Background()
	name := redistest.Name(t)
	k := func(s string) string { return "{" + name + "}:" + s }
	now := time.Now()
	id, expired, forever := permitID(t), permitID(t), permitID(t)
	require.NoError(t, rdb.HSet(ctx, k("lock"), "u:1", 2).Err())
	require.NoError(t, rdb.PExpire(ctx, k("lock"), 20*time.Second).Err())
	require.NoError(t, rdb.HSet(ctx, k("forever"), "u:1", 1).Err())
	require.NoError(t, rdb.HSet(ctx, k("read"), "mode", "read", "u:1", 1).Err())
	require.NoError(t, rdb.PExpire(ctx, k("read"), 10*time.Second).Err())
	require.NoError(t, rdb.Set(ctx, k("string"), "x", 0).Err())
	require.NoError(t, rdb.ZAdd(ctx, k("sem:timeout"),
		redis.Z{Score: float64(now.Add(15 * time.Second).UnixMilli()), Member: id},
		redis.Z{Score: float64(now.Add(-time.Second).UnixMilli()), Member: expired},
		redis.Z{Score: 922337203685477, Member: forever}).Err())
	require.NoError(t, rdb.ZAdd(ctx, k("short:timeout"), redis.Z{Score: float64(now.Add(15 * time.Second).UnixMilli()), Member: id}).Err())
	require.NoError(t, rdb.PExpire(ctx, k("short:timeout"), 5*time.Second).Err())
	before := dumpAll(t, rdb, k("lock"), k("forever"), k("read"), k("string"), k("sem:timeout"), k("short:timeout"))

	lock := func(key, field string) lua.Renewal { return lua.NewLock(key).Renewal(field) }
	read := func(key, field string) lua.Renewal { return lua.NewLayoutLock(key, lua.LayoutRead).Renewal(field) }
	permit := func(key, id string) lua.Renewal { return lua.Renewal{Kind: lua.RenewPermit, Key: key, Member: id} }
	cases := []struct {
		what     string
		hold     lua.Renewal
		min, max int64
	}{
		{"lock held", lock(k("lock"), "u:1"), 19_000, 20_000},
		{"lock without the field", lock(k("lock"), "u:2"), lua.Gone, lua.Gone},
		{"lock without a TTL", lock(k("forever"), "u:1"), lua.NoTimeout, lua.NoTimeout},
		{"lock key missing", lock(k("none"), "u:1"), lua.Gone, lua.Gone},
		{"lock key of another type", lock(k("string"), "u:1"), lua.Gone, lua.Gone},
		{"read hold", read(k("read"), "u:1"), 9_000, 10_000},
		{"read hold missing", read(k("read"), "u:2"), lua.Gone, lua.Gone},
		{"permit held", permit(k("sem:timeout"), id), 14_000, 15_000},
		{"permit expired", permit(k("sem:timeout"), expired), lua.Gone, lua.Gone},
		{"permit without a lease", permit(k("sem:timeout"), forever), lua.NoTimeout, lua.NoTimeout},
		{"permit whose set expires sooner", permit(k("short:timeout"), id), 4_000, 5_000},
		{"permit missing", permit(k("sem:timeout"), permitID(t)), lua.Gone, lua.Gone},
		{"permit set of another type", permit(k("string"), id), lua.Gone, lua.Gone},
	}
	holds := make([]lua.Renewal, len(cases))
	for i, c := range cases {
		holds[i] = c.hold
	}
	require.NoError(t, lua.LoadCheck(ctx, rdb))
	pipe := rdb.Pipeline()
	cmd := lua.CheckCmd(ctx, pipe, holds, now)
	_, err := pipe.Exec(ctx)
	require.NoError(t, err)
	left, err := lua.CheckResult(cmd)
	require.NoError(t, err)
	for i, c := range cases {
		require.GreaterOrEqual(t, left[i], c.min, c.what)
		require.LessOrEqual(t, left[i], c.max, c.what)
	}
	require.Equal(t, before, dumpAll(t, rdb, k("lock"), k("forever"), k("read"), k("string"), k("sem:timeout"), k("short:timeout")))
}

// dumpAll returns DUMP of each key.
func dumpAll(t *testing.T, rdb *redis.Client, keys ...string) []string {
	t.Helper()
	out := make([]string, len(keys))
	for i, key := range keys {
		out[i] = rdb.Dump(context.Background(), key).Val()
	}
	return out
}
