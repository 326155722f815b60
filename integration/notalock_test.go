package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// promptly bounds a call that must answer without waiting: far below the
// waits the calls are given (2 s), far above a round trip.
const promptly = time.Second

// lockKind is one kind of lock, as a Locker on a name.
type lockKind struct {
	name string
	of   func(c *rlock.Client, name string) rlock.Locker
}

// allKinds are every kind of lock of package rlock, both sides of an RWMutex
// included.
var allKinds = []lockKind{
	{"Mutex", func(c *rlock.Client, n string) rlock.Locker { return c.NewMutex(n) }},
	{"NonReentrantMutex", func(c *rlock.Client, n string) rlock.Locker { return c.NewNonReentrantMutex(n) }},
	{"FencedMutex", func(c *rlock.Client, n string) rlock.Locker { return c.NewFencedMutex(n) }},
	{"SpinMutex", func(c *rlock.Client, n string) rlock.Locker { return c.NewSpinMutex(n) }},
	{"FairMutex", func(c *rlock.Client, n string) rlock.Locker { return c.NewFairMutex(n) }},
	{"NonReentrantFairMutex", func(c *rlock.Client, n string) rlock.Locker { return c.NewNonReentrantFairMutex(n) }},
	{"ReadSide", func(c *rlock.Client, n string) rlock.Locker { return c.NewRWMutex(n).ReadLock() }},
	{"WriteSide", func(c *rlock.Client, n string) rlock.Locker { return c.NewRWMutex(n).WriteLock() }},
}

// notALockShapes are hashes that lock_shape.lua refuses: no ':' in an owner
// field, a count that is not a positive integer, a "mode" of another value.
var notALockShapes = []struct {
	name string
	hash map[string]string
}{
	{"foo-bar", map[string]string{"foo": "bar"}},
	{"count-x", map[string]string{"a:1": "x"}},
	{"count-0", map[string]string{"a:1": "0"}},
	{"mode-other", map[string]string{"mode": "other", "a:1": "1"}},
	{"nocolon", map[string]string{"nocolon": "1"}},
}

// putHash writes hash at name, with the time to live ttl (0: none).
func putHash(t testing.TB, rdb redis.Cmdable, name string, hash map[string]string, ttl time.Duration) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, rdb.Del(ctx, name).Err())
	require.NoError(t, rdb.HSet(ctx, name, hash).Err())
	if ttl > 0 {
		require.NoError(t, rdb.PExpire(ctx, name, ttl).Err())
	}
}

// keysOf returns every key of the server that mentions name's random suffix
// (redistest.Name's): the lock's own key and any key derived from it (token,
// queue, deadlines, read timeouts, latches).
func keysOf(t testing.TB, rdb redis.Cmdable, name string) []string {
	t.Helper()
	suffix := name[strings.LastIndexByte(name, ':')+1:]
	require.Regexp(t, `^[0-9a-f]{12}$`, suffix, "redistest.Name's suffix")
	keys, err := rdb.Keys(context.Background(), "*"+suffix+"*").Result()
	require.NoError(t, err)
	return keys
}

// requireHashAsPut requires the key name to be hash, unchanged, its time to
// live ttl (0: none) give or take the test's duration, and no key derived
// from name to exist.
func requireHashAsPut(t testing.TB, rdb redis.Cmdable, name string, hash map[string]string, ttl time.Duration) {
	t.Helper()
	ctx := context.Background()
	require.Equal(t, "hash", rdb.Type(ctx, name).Val())
	require.Equal(t, hash, holders(t, rdb, name), "the hash is unchanged")
	pttl, err := rdb.PTTL(ctx, name).Result()
	require.NoError(t, err)
	if ttl == 0 {
		require.Equal(t, time.Duration(-1), pttl, "still no time to live")
	} else {
		require.Greater(t, pttl, ttl-20*time.Second, "time to live kept")
		require.LessOrEqual(t, pttl, ttl, "time to live kept")
	}
	require.Equal(t, []string{name}, keysOf(t, rdb, name), "no key added")
}

// TestNotALockHashIsWrongTypeForEveryKind: a hash that is not a lock's, with or
// without a time to live, is ErrWrongType for every call of every kind that
// reads it as a lock: acquisitions (the conflict path, with and without a wait,
// which must not wait), inspections and ForceUnlock. After all of them the hash
// is as it was, its time to live too, and no key was added beside it.
func TestNotALockHashIsWrongTypeForEveryKind(t *testing.T) {
	for _, shape := range notALockShapes {
		for _, ttl := range []time.Duration{0, time.Minute} {
			for _, k := range allKinds {
				ttlName := "ttl"
				if ttl == 0 {
					ttlName = "nottl"
				}
				t.Run(shape.name+"/"+ttlName+"/"+k.name, func(t *testing.T) {
					t.Parallel()
					rdb, c, name := setup(t)
					putHash(t, rdb, name, shape.hash, ttl)
					l := k.of(c, name)
					ctx := testCtx(t, 30*time.Second)

					lease, err := l.TryLock(ctx)
					require.ErrorIs(t, err, rlock.ErrWrongType, "TryLock")
					require.Nil(t, lease)

					start := time.Now()
					lease, err = l.TryLock(ctx, rlock.WithWaitTime(300*time.Millisecond))
					require.ErrorIs(t, err, rlock.ErrWrongType, "TryLock with a wait time")
					require.NotErrorIs(t, err, rlock.ErrNotAcquired)
					require.Nil(t, lease)
					require.Less(t, time.Since(start), promptly, "TryLock with a wait time must not wait")

					lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
					start = time.Now()
					lease, err = l.Lock(lctx)
					took := time.Since(start)
					lctxErr := lctx.Err()
					cancel()
					require.ErrorIs(t, err, rlock.ErrWrongType, "Lock")
					require.NotErrorIs(t, err, rlock.ErrNotAcquired)
					require.NotErrorIs(t, err, context.DeadlineExceeded)
					require.Nil(t, lease)
					require.NoError(t, lctxErr, "Lock returned before its deadline")
					require.Less(t, took, promptly, "Lock must not wait")

					// Owned ctx: the same calls by an owner, and its inspections.
					octx := rlock.WithOwner(ctx)
					_, err = l.TryLock(octx)
					require.ErrorIs(t, err, rlock.ErrWrongType, "TryLock by an owner")

					locked, err := l.IsLocked(ctx)
					require.ErrorIs(t, err, rlock.ErrWrongType, "IsLocked")
					require.False(t, locked)
					held, err := l.IsHeld(octx)
					require.ErrorIs(t, err, rlock.ErrWrongType, "IsHeld")
					require.False(t, held)
					n, err := l.HoldCount(octx)
					require.ErrorIs(t, err, rlock.ErrWrongType, "HoldCount")
					require.Zero(t, n)
					_, err = l.RemainTTL(ctx)
					require.ErrorIs(t, err, rlock.ErrWrongType, "RemainTTL")

					ok, err := l.ForceUnlock(ctx)
					require.ErrorIs(t, err, rlock.ErrWrongType, "ForceUnlock")
					require.False(t, ok, "ForceUnlock deleted nothing")

					require.ErrorIs(t, l.Unlock(octx), rlock.ErrNotHeld, "the owner holds nothing")
					requireHashAsPut(t, rdb, name, shape.hash, ttl)
				})
			}
		}
	}
}

// Owner fields as Redisson writes them: "<client uuid>:<thread id>".
const javaClient = "6f1a3a7e-7a35-4b43-9c1e-2f1d1b7f0c2e"

// lockShapes are hashes Redisson writes, with the kinds for which each is
// locked (isLocked): a plain lock hash for every kind of the RLock layout,
// and not for the sides of a read/write lock, whose isLocked reads "mode"; a
// read/write lock's hash for the side of its mode, and for every other kind
// (any hash is held for them).
var lockShapes = []struct {
	name   string
	hash   map[string]string
	mode   string // "" for a plain lock hash
	holder string // a field that holds it
}{
	{"plain-1", map[string]string{javaClient + ":57": "1"}, "", javaClient + ":57"},
	{"plain-3", map[string]string{javaClient + ":57": "3"}, "", javaClient + ":57"},
	{"read", map[string]string{"mode": "read", javaClient + ":1": "2", javaClient + ":2": "1"}, "read", javaClient + ":1"},
	{"write", map[string]string{"mode": "write", javaClient + ":1:write": "1"}, "write", javaClient + ":1:write"},
}

// TestLockShapedHashesAreLocks: the hashes Redisson writes are locks for every
// kind: an acquisition by a new owner is refused as held (ErrNotAcquired,
// never ErrWrongType), or granted where Redisson grants it (a reader on a lock
// in read mode); IsLocked and ForceUnlock read them as Redisson does: a side of
// a read/write lock is locked, and force-released, only in its own mode.
func TestLockShapedHashesAreLocks(t *testing.T) {
	const ttl = time.Minute
	for _, shape := range lockShapes {
		for _, k := range allKinds {
			t.Run(shape.name+"/"+k.name, func(t *testing.T) {
				t.Parallel()
				rdb, c, name := setup(t)
				ctx := testCtx(t, 30*time.Second)
				side := map[string]string{"ReadSide": "read", "WriteSide": "write"}[k.name]
				wantLocked := side == "" || side == shape.mode

				putHash(t, rdb, name, shape.hash, ttl)
				l := k.of(c, name)
				octx := rlock.WithOwner(ctx)
				if side == "read" && shape.mode == "read" {
					// Redisson's read lock: another reader joins the readers. On
					// a name of its own: its release clears the zombie readers
					// and leaves an unlock latch.
					join := redistest.Name(t)
					putHash(t, rdb, join, shape.hash, ttl)
					lease, err := k.of(c, join).TryLock(octx)
					require.NoError(t, err, "a reader joins a lock in read mode")
					require.Equal(t, "1", holders(t, rdb, join)[lease.Holder()])
					require.Equal(t, len(shape.hash)+1, len(holders(t, rdb, join)))
					require.NoError(t, lease.Unlock(ctx))
				} else {
					lease, err := l.TryLock(octx)
					require.ErrorIs(t, err, rlock.ErrNotAcquired, "TryLock of a held lock")
					require.NotErrorIs(t, err, rlock.ErrWrongType)
					require.NotContains(t, err.Error(), "held in this client")
					require.Nil(t, lease)
					start := time.Now()
					_, err = l.TryLock(octx, rlock.WithWaitTime(50*time.Millisecond))
					require.ErrorIs(t, err, rlock.ErrNotAcquired, "TryLock with a wait time of a held lock")
					require.NotErrorIs(t, err, rlock.ErrWrongType)
					require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond, "it waited")
				}
				requireHashAsPut(t, rdb, name, shape.hash, ttl)

				locked, err := l.IsLocked(ctx)
				require.NoError(t, err)
				require.Equal(t, wantLocked, locked, "IsLocked")
				n, err := l.HoldCount(octx)
				require.NoError(t, err)
				require.Zero(t, n, "the new owner holds nothing")
				remain, err := l.RemainTTL(ctx)
				require.NoError(t, err)
				if wantLocked {
					require.Greater(t, remain, ttl-20*time.Second)
					require.LessOrEqual(t, remain, ttl)
				} else {
					require.Equal(t, rlock.NotLocked, remain)
				}

				ok, err := l.ForceUnlock(ctx)
				require.NoError(t, err)
				require.Equal(t, wantLocked, ok, "ForceUnlock releases a lock in its kind's mode only")
				if wantLocked {
					require.Zero(t, rdb.Exists(ctx, name).Val(), "ForceUnlock deleted the lock")
					require.Empty(t, keysOf(t, rdb, name))
				} else {
					requireHashAsPut(t, rdb, name, shape.hash, ttl)
				}
			})
		}
	}
}

// TestCLIStatusAgreesWithLibraryOnNotALock: holdfast status and unlock --force
// apply the library's rule: every hash the library refuses with ErrWrongType
// is "not_a_lock" and left alone by unlock --force (65); a lock's hash, which
// the library reads as locked, is a "lock" that unlock --force releases.
func TestCLIStatusAgreesWithLibraryOnNotALock(t *testing.T) {
	rdb, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	url := sharedURL(t)

	var names []string
	for _, shape := range notALockShapes {
		n := name + ":" + shape.name
		putHash(t, rdb, n, shape.hash, 0)
		_, err := c.NewMutex(n).IsLocked(ctx)
		require.ErrorIs(t, err, rlock.ErrWrongType, "the library: %s", shape.name)
		names = append(names, n)
	}
	lock := name + ":lock"
	lockHash := map[string]string{javaClient + ":57": "2"}
	putHash(t, rdb, lock, lockHash, time.Minute)
	locked, err := c.NewMutex(lock).IsLocked(ctx)
	require.NoError(t, err)
	require.True(t, locked)

	list := statusJSON(t, append(names, lock)...)
	require.Len(t, list, len(names)+1)
	for i, n := range names {
		require.Equal(t, n, list[i].Name)
		require.Equal(t, "not_a_lock", list[i].Kind, n)
		require.Equal(t, "hash", list[i].RedisType, n)
	}
	st := list[len(names)]
	require.Equal(t, lock, st.Name)
	require.Equal(t, "lock", st.Kind)
	require.Len(t, st.Holders, 1)
	require.Equal(t, javaClient+":57", st.Holders[0].Field)
	require.EqualValues(t, 2, st.Holders[0].Count)

	for i, n := range names {
		r := statusCLI(t, "unlock", "--force", "--yes", "--redis", url, n)
		require.Equal(t, 65, r.code, "%s: stdout %q, stderr %q", n, r.stdout, r.stderr)
		require.Contains(t, r.stderr, "not a lock")
		require.Equal(t, notALockShapes[i].hash, holders(t, rdb, n), "unlock --force left %s alone", n)
		require.Equal(t, time.Duration(-1), rdb.PTTL(ctx, n).Val())
	}

	r := statusCLI(t, "unlock", "--force", "--yes", "--redis", url, lock)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	require.Contains(t, r.stdout, "force-released "+lock)
	require.Zero(t, rdb.Exists(ctx, lock).Val())
}

// ownerIDOf is the owner id of a lease's holder: the decimal part after the
// holder field's last ':'.
func ownerIDOf(t testing.TB, l *rlock.Lease) string {
	t.Helper()
	h := l.Holder()
	id := h[strings.LastIndexByte(h, ':')+1:]
	require.Regexp(t, `^[1-9][0-9]*$`, id, "holder %q", h)
	return id
}

// requireNamesHolder requires err to be a failed acquisition that names id,
// an owner of the same client, as the holder.
// requireNamesHolder requires err to be a failed acquisition that names the
// owner id of this client as the holder, with the hint about WithOwner when
// the call's ctx carried no owner (hint), without it otherwise: two owners of
// one client that contend, each with its own WithOwner, are ordinary contention.
func requireNamesHolder(t testing.TB, err error, id string, hint bool) {
	t.Helper()
	require.ErrorIs(t, err, rlock.ErrNotAcquired)
	require.Contains(t, err.Error(), "held in this client by owner "+id)
	if hint {
		require.Contains(t, err.Error(), "WithOwner")
	} else {
		require.NotContains(t, err.Error(), "WithOwner", "ordinary contention between two owners")
	}
}

// TestSecondLockWithoutOwnerNamesTheHolder: an acquisition that fails because
// an owner of the same client holds the lock (most often the caller itself,
// with a ctx that does not carry that owner) says so, naming that owner: Lock
// ended by its ctx, TryLock with and without a wait time. An acquisition in
// another client, blocked by the same holder, does not claim it is held in
// its client.
func TestSecondLockWithoutOwnerNamesTheHolder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		first  func(ctx context.Context) context.Context // ctx of the holder
		second func(ctx context.Context) context.Context // ctx of the second call, from the holder's
		hint   bool                                      // the error points at WithOwner
	}{
		{"NoOwner", func(ctx context.Context) context.Context { return ctx },
			func(ctx context.Context) context.Context { return ctx }, true},
		{"FreshOwner", rlock.WithOwner, rlock.WithOwner, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, c, name := setup(t)
			base := testCtx(t, 30*time.Second)
			m := c.NewMutex(name)
			hctx := tc.first(base)
			lease, err := m.Lock(hctx)
			require.NoError(t, err)
			defer func() { require.NoError(t, lease.Unlock(base)) }()
			id := ownerIDOf(t, lease)

			start := time.Now()
			lctx, cancel := context.WithTimeout(tc.second(hctx), 300*time.Millisecond)
			l2, err := m.Lock(lctx)
			took := time.Since(start)
			lctxErr := lctx.Err()
			cancel()
			require.Nil(t, l2)
			requireNamesHolder(t, err, id, tc.hint)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.ErrorIs(t, lctxErr, context.DeadlineExceeded, "it waited for its ctx")
			require.Less(t, took, 5*time.Second)

			l2, err = m.TryLock(tc.second(hctx))
			require.Nil(t, l2)
			requireNamesHolder(t, err, id, tc.hint)

			l2, err = m.TryLock(tc.second(hctx), rlock.WithWaitTime(100*time.Millisecond))
			require.Nil(t, l2)
			requireNamesHolder(t, err, id, tc.hint)

			// Another client, blocked by this client's holder: not held there.
			other := newClient(t, redistest.Shared(t).Client(t))
			om := other.NewMutex(name)
			octx, ocancel := context.WithTimeout(base, 300*time.Millisecond)
			l2, err = om.Lock(octx)
			ocancel()
			require.Nil(t, l2)
			require.ErrorIs(t, err, rlock.ErrNotAcquired)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.NotContains(t, err.Error(), "held in this client")

			l2, err = om.TryLock(base)
			require.Nil(t, l2)
			require.ErrorIs(t, err, rlock.ErrNotAcquired)
			require.NotContains(t, err.Error(), "held in this client")

			// None of the failed calls disturbed the holder.
			held, err := m.IsLocked(base)
			require.NoError(t, err)
			require.True(t, held)
			require.NoError(t, lease.Err())
		})
	}
}
