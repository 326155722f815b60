package integration

import (
	"context"
	"crypto/fips140"
	"crypto/sha1"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Bounded waits and retried unlocks, against real Redis. Two promises:
//
//   - No wait outlives the hold it waits for: however a hold ends (its fixed lease
//     runs out, its key is deleted, force-unlocked by a third client or replaced
//     by another type of value), a waiter blocked in Lock or TryLock returns soon
//     after, whether it waits in the holder's own Client or in another Client on
//     the same server. Holder and waiter are always different owners.
//   - A retried Unlock never crashes: after the reply of an Unlock was lost,
//     whatever the release did (partial, released, handed off to a waiter of the
//     same Client), Unlock again is recognised and returns nil.
//
// A failing run ends in bounded time: every Lock and TryLock runs with a ctx that
// ends within bwCallTimeout, blocking calls run in goroutines that report their
// result (a panic included) through a channel, every wait on them is bounded, and
// cleanups give up on a call or Client that does not return. Times are measured
// and logged, so that runs of different versions can be compared.

const (
	bwCallTimeout   = 12 * time.Second // ctx deadline of every Lock and TryLock
	bwUnlockTimeout = 5 * time.Second  // ctx deadline of every Unlock
	bwStuck         = 3 * time.Second  // how long a cleanup waits for a call or Close

	// Watchdog settings of the tests whose holds are watchdog holds that end
	// from outside (deleted, replaced).
	bwShortTimeout  = 3 * time.Second
	bwShortInterval = 300 * time.Millisecond

	// bwReadTimeout is the read timeout of the clients behind a proxy: how long
	// a call whose reply was dropped takes to fail.
	bwReadTimeout = 500 * time.Millisecond
)

// bwShort returns the options of a Client with short watchdog settings.
func bwShort() []rlock.ClientOption {
	return []rlock.ClientOption{rlock.WithWatchdogTimeout(bwShortTimeout), rlock.WithRenewInterval(bwShortInterval)}
}

// bwMs rounds d to the millisecond, for logs.
func bwMs(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// bwOutcome is what a function run by bwDo returned, or the panic it raised.
type bwOutcome struct {
	err      error
	panicked any
	stack    string
	took     time.Duration
}

// bwDo runs f in a goroutine and waits at most d for it. ok is false when f is
// still running then (it is left behind). A panic of f is recovered and returned.
func bwDo(d time.Duration, f func() error) (o bwOutcome, ok bool) {
	ch := make(chan bwOutcome, 1)
	start := time.Now()
	go func() {
		defer func() {
			if r := recover(); r != nil {
				ch <- bwOutcome{panicked: r, stack: string(debug.Stack()), took: time.Since(start)}
			}
		}()
		err := f()
		ch <- bwOutcome{err: err, took: time.Since(start)}
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case o = <-ch:
		return o, true
	case <-timer.C:
		return bwOutcome{}, false
	}
}

// bwClient returns an rlock.Client on rdb, closed at the end of the test. The
// cleanup waits at most bwStuck for Close: a Client left broken by a failure (a
// panic while it held its mutex) must not hang the run.
func bwClient(t *testing.T, rdb redis.UniversalClient, opts ...rlock.ClientOption) *rlock.Client {
	t.Helper()
	c, err := rlock.New(rdb, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		if o, ok := bwDo(bwStuck, c.Close); !ok || o.panicked != nil {
			t.Logf("Close of client %s did not return within %v (or panicked: %v): left behind", c.ID(), bwStuck, o.panicked)
		}
	})
	return c
}

// bwDelAtEnd deletes keys at the end of the test, whatever state it left them in.
// Call it after admin was created, so that it runs before admin is closed.
func bwDelAtEnd(t *testing.T, admin *redis.Client, keys ...string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = admin.Del(ctx, keys...).Err()
	})
}

// bwOwner returns the ctx of a new owner, without deadline: each call derives
// its own bounded ctx from it.
func bwOwner() context.Context { return rlock.WithOwner(context.Background()) }

// bwCtx returns parent with a deadline d from now, cancelled at the end of the test.
func bwCtx(t *testing.T, parent context.Context, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(parent, d)
	t.Cleanup(cancel)
	return ctx
}

// bwRequireGone fails the test, describing what is left, unless the lock key
// name is gone.
func bwRequireGone(t *testing.T, admin *redis.Client, name string) {
	t.Helper()
	ctx := context.Background()
	n, err := admin.Exists(ctx, name).Result()
	require.NoError(t, err)
	if n == 0 {
		return
	}
	typ, _ := admin.Type(ctx, name).Result()
	pttl, _ := admin.PTTL(ctx, name).Result()
	var content any = typ
	if typ == "hash" {
		content, _ = admin.HGetAll(ctx, name).Result()
	}
	t.Fatalf("the lock key is still there: %v (type %s, PTTL %v)", content, typ, pttl)
}

// bwGot is what a call run by bwStart returned, and when.
type bwGot struct {
	lease    *rlock.Lease
	err      error
	at       time.Time
	panicked any
	stack    string
}

// bwCall is a Lock or TryLock running in a goroutine.
type bwCall struct {
	who    string
	ch     chan bwGot
	cancel context.CancelFunc
	got    *bwGot // set once the result was received (test goroutine only)
}

// bwStart runs f in a goroutine with a ctx derived from octx that ends within
// bwCallTimeout. At the end of the test the call is cancelled, and a lease it
// returned and that is still open is unlocked.
func bwStart(t *testing.T, who string, octx context.Context, f func(ctx context.Context) (*rlock.Lease, error)) *bwCall {
	ctx, cancel := context.WithTimeout(octx, bwCallTimeout)
	c := &bwCall{who: who, ch: make(chan bwGot, 1), cancel: cancel}
	go func() {
		defer func() {
			if r := recover(); r != nil {
				c.ch <- bwGot{at: time.Now(), panicked: r, stack: string(debug.Stack())}
			}
		}()
		l, err := f(ctx)
		c.ch <- bwGot{lease: l, err: err, at: time.Now()}
	}()
	t.Cleanup(func() { c.release(t) })
	return c
}

// await waits at most d for the call's result.
func (c *bwCall) await(d time.Duration) (bwGot, bool) {
	if c.got != nil {
		return *c.got, true
	}
	timer := time.NewTimer(max(d, 0))
	defer timer.Stop()
	select {
	case g := <-c.ch:
		c.got = &g
		return g, true
	case <-timer.C:
		return bwGot{}, false
	}
}

// expect waits for the call's result until since+bound and logs how long after
// since (the event) it came. When it does not come in time (or the call
// panicked) it reports an error, cancels the call and returns ok false.
func (c *bwCall) expect(t *testing.T, since time.Time, bound time.Duration, event string) (bwGot, bool) {
	t.Helper()
	g, ok := c.await(time.Until(since.Add(bound)))
	if !ok {
		c.cancel()
		late, ok := c.await(bwStuck)
		if !ok {
			t.Errorf("%s: no result within %v of %s, and none %v after its ctx was then cancelled", c.who, bound, event, bwStuck)
		} else {
			t.Errorf("%s: no result within %v of %s; cancelled then, it returned %v after %s (lease %t, err %v)",
				c.who, bound, event, bwMs(late.at.Sub(since)), event, late.lease != nil, late.err)
		}
		return bwGot{}, false
	}
	took := bwMs(g.at.Sub(since))
	if g.panicked != nil {
		t.Errorf("%s: panicked %v after %s: %v\n%s", c.who, took, event, g.panicked, g.stack)
		return g, false
	}
	if g.err == nil {
		t.Logf("%s acquired %v after %s (bound %v)", c.who, took, event, bound)
	} else {
		t.Logf("%s returned %v after %s (bound %v): %v", c.who, took, event, bound, g.err)
	}
	return g, true
}

// expectLease is expect for a call that must acquire: it returns the lease, or
// nil after reporting an error.
func (c *bwCall) expectLease(t *testing.T, since time.Time, bound time.Duration, event string) *rlock.Lease {
	t.Helper()
	g, ok := c.expect(t, since, bound, event)
	if !ok {
		return nil
	}
	if g.err != nil || g.lease == nil {
		t.Errorf("%s: want a lease, got error %v", c.who, g.err)
		return nil
	}
	return g.lease
}

// release cancels the call and unlocks the lease it returned if still open,
// giving up on a call or an Unlock that does not return.
func (c *bwCall) release(t *testing.T) {
	c.cancel()
	g, ok := c.await(bwStuck)
	if !ok {
		t.Logf("%s: still running %v after its ctx was cancelled: left behind", c.who, bwStuck)
		return
	}
	if g.lease == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), bwUnlockTimeout)
	defer cancel()
	o, ok := bwDo(bwStuck, func() error {
		if g.lease.Err() != nil {
			return nil // unlocked by the test, or lost
		}
		return g.lease.Unlock(ctx)
	})
	if !ok || o.panicked != nil || o.err != nil {
		t.Logf("%s: cleanup Unlock: returned within %v %t, panic %v, err %v", c.who, bwStuck, ok, o.panicked, o.err)
	}
}

// bwUnlock unlocks l with a ctx ending within bwUnlockTimeout. It fails the test
// at once if Unlock panics, or has not returned a second after that deadline.
func bwUnlock(t *testing.T, who string, l *rlock.Lease) (time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bwUnlockTimeout)
	defer cancel()
	o, ok := bwDo(bwUnlockTimeout+time.Second, func() error { return l.Unlock(ctx) })
	switch {
	case !ok:
		t.Fatalf("%s: Unlock did not return within %v (its ctx ended at %v)", who, bwUnlockTimeout+time.Second, bwUnlockTimeout)
	case o.panicked != nil:
		t.Fatalf("%s: Unlock panicked after %v: %v\n%s", who, bwMs(o.took), o.panicked, o.stack)
	}
	return o.took, o.err
}

// bwWatch returns a channel that receives the time at which l's Done was seen
// closed, by a goroutine started now and stopped at the end of the test.
func bwWatch(t *testing.T, l *rlock.Lease) <-chan time.Time {
	ch := make(chan time.Time, 1)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		select {
		case <-l.Done():
			ch <- time.Now()
		case <-stop:
		}
	}()
	return ch
}

// bwExpectLost checks that l ended (ended is bwWatch(l)) with ErrLockLost within
// bound of since.
func bwExpectLost(t *testing.T, who string, l *rlock.Lease, ended <-chan time.Time, since time.Time, bound time.Duration, event string) {
	t.Helper()
	var at time.Time
	select {
	case at = <-ended:
	default:
		timer := time.NewTimer(time.Until(since.Add(bound)))
		defer timer.Stop()
		select {
		case at = <-ended:
		case <-timer.C:
			t.Errorf("%s: Done not closed within %v of %s (Err %v)", who, bound, event, l.Err())
			return
		}
	}
	took := at.Sub(since)
	t.Logf("%s ended %v after %s (bound %v): %v", who, bwMs(took), event, bound, l.Err())
	if took > bound {
		t.Errorf("%s ended %v after %s, later than %v", who, bwMs(took), event, bound)
	}
	if !errors.Is(l.Err(), rlock.ErrLockLost) {
		t.Errorf("%s ended with %v, want an error matching ErrLockLost", who, l.Err())
	}
}

// bwLogLease logs whether l has ended, and why.
func bwLogLease(t *testing.T, who string, l *rlock.Lease) {
	t.Helper()
	select {
	case <-l.Done():
		t.Logf("%s has ended: %v", who, l.Err())
	default:
		t.Logf("%s is still open", who)
	}
}

// 1. A hold with a fixed lease that is never unlocked: a waiter acquires once the
// lease has run out, within 1.5 s of the start of a 1 s hold.
func TestBoundedWaitFixedLeaseNeverUnlocked(t *testing.T) {
	const lease, bound = time.Second, 1500 * time.Millisecond
	waits := []struct {
		name string
		call func(ctx context.Context, m *rlock.Mutex) (*rlock.Lease, error)
	}{
		{"Lock", func(ctx context.Context, m *rlock.Mutex) (*rlock.Lease, error) { return m.Lock(ctx) }},
		{"TryLockWait8s", func(ctx context.Context, m *rlock.Mutex) (*rlock.Lease, error) {
			return m.TryLock(ctx, rlock.WithWaitTime(8*time.Second))
		}},
	}
	for _, side := range []string{"SameClient", "OtherClient"} {
		t.Run(side, func(t *testing.T) {
			for _, w := range waits {
				t.Run(w.name, func(t *testing.T) {
					admin := redistest.Shared(t).Client(t)
					name := redistest.Name(t)
					bwDelAtEnd(t, admin, name)
					a := bwClient(t, admin)
					wc := a
					if side == "OtherClient" {
						wc = bwClient(t, admin)
					}

					begin := time.Now()
					hl, err := a.NewMutex(name).TryLock(bwCtx(t, bwOwner(), bwCallTimeout), rlock.WithLeaseTime(lease))
					require.NoError(t, err)
					wm := wc.NewMutex(name)
					call := bwStart(t, "waiter", bwOwner(), func(ctx context.Context) (*rlock.Lease, error) { return w.call(ctx, wm) })

					wl := call.expectLease(t, begin, bound, "the 1 s hold began")
					bwLogLease(t, "the holder's lease", hl)
					if wl == nil {
						t.FailNow()
					}
					_, err = bwUnlock(t, "the waiter's Unlock", wl)
					require.NoError(t, err)
					bwRequireGone(t, admin, name)
				})
			}
		})
	}
}

// bwWaitedHold is a watchdog hold of a lock by an owner of client a, and a
// waiter blocked in Lock on it, in a (side "SameClient") or in another client
// ("OtherClient"), subscribed to the lock's channel.
type bwWaitedHold struct {
	admin *redis.Client
	name  string
	hold  *rlock.Lease
	wait  *bwCall
}

func bwHoldAndWait(t *testing.T, side string, opts ...rlock.ClientOption) bwWaitedHold {
	admin := redistest.Shared(t).Client(t)
	name := redistest.Name(t)
	bwDelAtEnd(t, admin, name)
	a := bwClient(t, admin, opts...)
	wc := a
	if side == "OtherClient" {
		wc = bwClient(t, admin, opts...)
	}
	hl, err := a.NewMutex(name).Lock(bwCtx(t, bwOwner(), bwCallTimeout))
	require.NoError(t, err)
	wm := wc.NewMutex(name)
	call := bwStart(t, "waiter", bwOwner(), func(ctx context.Context) (*rlock.Lease, error) { return wm.Lock(ctx) })
	awaitSubscribers(t, admin, lua.ChannelName(name), 1)
	return bwWaitedHold{admin: admin, name: name, hold: hl, wait: call}
}

// 2. A watchdog hold whose key is deleted from outside: a waiter of the holder's
// client acquires within one renewal interval plus slack, a waiter of another
// client within the watchdog timeout plus slack; the holder's lease is lost.
func TestBoundedWaitExternalDelOfWatchdogHold(t *testing.T) {
	cases := []struct {
		side  string
		bound time.Duration
	}{
		{"SameClient", time.Second},
		{"OtherClient", bwShortTimeout + time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.side, func(t *testing.T) {
			w := bwHoldAndWait(t, tc.side, bwShort()...)
			admin, name, hl, call := w.admin, w.name, w.hold, w.wait
			hlEnded := bwWatch(t, hl)

			deleted := time.Now()
			require.NoError(t, admin.Del(context.Background(), name).Err())
			wl := call.expectLease(t, deleted, tc.bound, "the DEL")
			bwExpectLost(t, "the holder's lease", hl, hlEnded, deleted, 2*time.Second, "the DEL")
			if wl == nil {
				t.FailNow()
			}
			_, err := bwUnlock(t, "the waiter's Unlock", wl)
			require.NoError(t, err)
			bwRequireGone(t, admin, name)
		})
	}
}

// 3. A watchdog hold force-unlocked by a third client: the waiter acquires
// within 1 s (the holder's watchdog timeout is 30 s).
func TestBoundedWaitForceUnlockByThirdClient(t *testing.T) {
	const bound = time.Second
	for _, side := range []string{"SameClient", "OtherClient"} {
		t.Run(side, func(t *testing.T) {
			w := bwHoldAndWait(t, side)
			admin, name, hl, call := w.admin, w.name, w.hold, w.wait
			third := bwClient(t, admin)

			forced := time.Now()
			ok, err := third.NewMutex(name).ForceUnlock(bwCtx(t, context.Background(), bwUnlockTimeout))
			require.NoError(t, err)
			require.True(t, ok, "the lock existed")
			wl := call.expectLease(t, forced, bound, "the force-unlock")
			if wl == nil {
				t.FailNow()
			}
			_, err = bwUnlock(t, "the waiter's Unlock", wl)
			require.NoError(t, err)
			bwRequireGone(t, admin, name)
			_, err = bwUnlock(t, "the holder's Unlock", hl)
			t.Logf("the holder's Unlock after the force-unlock: %v", err)
		})
	}
}

// 4. A watchdog hold whose key is replaced by a string: the waiter's Lock
// returns ErrWrongType (it does not hang), and the holder's lease is lost.
func TestBoundedWaitKeyReplacedByOtherType(t *testing.T) {
	cases := []struct {
		side  string
		bound time.Duration
	}{
		{"SameClient", 2 * time.Second},
		{"OtherClient", bwShortTimeout + time.Second}, // it sleeps at most the holder's lease
	}
	for _, tc := range cases {
		t.Run(tc.side, func(t *testing.T) {
			w := bwHoldAndWait(t, tc.side, bwShort()...)
			admin, name, hl, call := w.admin, w.name, w.hold, w.wait
			hlEnded := bwWatch(t, hl)

			replaced := time.Now()
			require.NoError(t, admin.Set(context.Background(), name, "x", 0).Err())
			if g, ok := call.expect(t, replaced, tc.bound, "SET name x"); ok {
				if g.lease != nil || !errors.Is(g.err, rlock.ErrWrongType) {
					t.Errorf("waiter: got lease %t, err %v; want an error matching ErrWrongType", g.lease != nil, g.err)
				}
			}
			bwExpectLost(t, "the holder's lease", hl, hlEnded, replaced, 2*time.Second, "SET name x")
			v, err := admin.Get(context.Background(), name).Result()
			require.NoError(t, err)
			require.Equal(t, "x", v, "the foreign value is left alone")
		})
	}
}

// 5. Four waiters, two in the holder's client and two in another, behind a 1 s
// fixed lease never unlocked: all four acquire in turn within 6 s, never two at
// once.
func TestBoundedWaitFourWaitersTwoClients(t *testing.T) {
	const lease, bound = time.Second, 6 * time.Second
	admin := redistest.Shared(t).Client(t)
	name := redistest.Name(t)
	bwDelAtEnd(t, admin, name)
	a, b := bwClient(t, admin), bwClient(t, admin)

	type turn struct {
		who       string
		at        time.Time
		fields    map[string]string
		hgetErr   error
		unlockErr error
	}
	turns := make(chan turn, 4)

	begin := time.Now()
	hl, err := a.NewMutex(name).TryLock(bwCtx(t, bwOwner(), bwCallTimeout), rlock.WithLeaseTime(lease))
	require.NoError(t, err)

	var calls []*bwCall
	for i, c := range []*rlock.Client{a, a, b, b} {
		who := fmt.Sprintf("%c%d", "AB"[i/2], i%2+1)
		m := c.NewMutex(name)
		calls = append(calls, bwStart(t, who, bwOwner(), func(ctx context.Context) (*rlock.Lease, error) {
			l, err := m.Lock(ctx)
			if err != nil {
				return nil, err
			}
			tn := turn{who: who, at: time.Now()}
			tn.fields, tn.hgetErr = admin.HGetAll(ctx, name).Result()
			tn.unlockErr = l.Unlock(ctx)
			turns <- tn
			return l, nil
		}))
	}

	for _, c := range calls {
		c.expectLease(t, begin, bound, "the 1 s hold began")
	}
	bwLogLease(t, "the holder's lease", hl)
	// turns is not closed: a call left behind may still send to it.
	n := 0
	for len(turns) > 0 {
		tn := <-turns
		n++
		t.Logf("turn %d: %s acquired %v after the hold began; holders then: %v", n, tn.who, bwMs(tn.at.Sub(begin)), tn.fields)
		require.NoError(t, tn.hgetErr)
		require.LessOrEqual(t, len(tn.fields), 1, "%s acquired while the hash had two holders: %v", tn.who, tn.fields)
		wantPrefix := a.ID() + ":"
		if tn.who[0] == 'B' {
			wantPrefix = b.ID() + ":"
		}
		for f, v := range tn.fields {
			require.True(t, strings.HasPrefix(f, wantPrefix), "%s acquired but the holder is %s", tn.who, f)
			require.Equal(t, "1", v, "%s acquired once, but its hold count is %s", tn.who, v)
		}
		require.NoError(t, tn.unlockErr, "%s's Unlock", tn.who)
	}
	require.Equal(t, 4, n, "turns taken")
	bwRequireGone(t, admin, name)
}

// bwCmd is one command a client behind the proxy ran, as seen by bwLog.
type bwCmd struct {
	name    string
	keys    string // numkeys of a script call
	release bool   // a release script: lua/release.lua or lua/release_partial.lua
	err     error
}

// bwReleaseScripts holds the SHA1 digests and texts of the release scripts, read
// from the checkout (this module lives in the library's repository). The
// digests are this test's own reckoning of what the server names the scripts
// by, computed as the server does, without the enforcement of
// GODEBUG=fips140=only (make test-fips), under which crypto/sha1 panics.
var bwReleaseScripts = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range []string{"../lua/release.lua", "../lua/release_partial.lua"} {
		src, err := os.ReadFile(f)
		if err != nil {
			panic(err)
		}
		fips140.WithoutEnforcement(func() { m[fmt.Sprintf("%x", sha1.Sum(src))] = true })
		m[string(src)] = true
	}
	return m
}()

func (c bwCmd) String() string {
	s := c.name
	if c.keys != "" {
		s += "(" + c.keys + " keys)"
	}
	if c.err != nil {
		s += "=" + c.err.Error()
	}
	return s
}

// bwLog is a go-redis hook that records the commands a client runs, each when
// it completes, and counts those in flight.
type bwLog struct {
	mu       sync.Mutex
	cmds     []bwCmd
	inflight atomic.Int64
}

func (h *bwLog) add(cmd redis.Cmder, err error) {
	c := bwCmd{name: cmd.Name(), err: err}
	if args := cmd.Args(); (c.name == "evalsha" || c.name == "eval") && len(args) > 2 {
		c.keys = fmt.Sprint(args[2])
		c.release = bwReleaseScripts[fmt.Sprint(args[1])]
	}
	h.mu.Lock()
	h.cmds = append(h.cmds, c)
	h.mu.Unlock()
}

func (h *bwLog) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.cmds)
}

func (h *bwLog) since(mark int) []bwCmd {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]bwCmd(nil), h.cmds[mark:]...)
}

func (h *bwLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *bwLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.inflight.Add(1)
		defer h.inflight.Add(-1)
		err := next(ctx, cmd)
		h.add(cmd, err)
		return err
	}
}

func (h *bwLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.inflight.Add(1)
		defer h.inflight.Add(-1)
		err := next(ctx, cmds)
		for _, c := range cmds {
			h.add(c, c.Err())
		}
		return err
	}
}

// bwTimeout reports whether err is a network timeout (a reply that never came).
func bwTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// bwProxied is an rlock.Client whose every connection, the subscriber's
// included, goes through a proxy that can drop replies. Its go-redis client does
// not retry (MaxRetries -1), so a lost reply surfaces to the caller after
// bwReadTimeout; its watchdog timeout is 5 min, so no renewal runs during a test.
type bwProxied struct {
	proxy  *redistest.Proxy
	direct *redis.Client // to the server, not through the proxy
	rdb    *redis.Client // through the proxy
	log    *bwLog
	c      *rlock.Client
}

func bwNewProxied(t *testing.T) *bwProxied {
	t.Helper()
	srv := redistest.Shared(t)
	p := &bwProxied{proxy: redistest.NewProxy(t, srv.Addr), log: &bwLog{}}
	p.direct = srv.Client(t)
	p.rdb = srv.Client(t, func(o *redis.Options) {
		o.Addr = p.proxy.Addr
		o.ReadTimeout = bwReadTimeout
		o.MaxRetries = -1
	})
	p.rdb.AddHook(p.log)
	// Tracking off: the proxy drops the next chunk of any connection, and the
	// tracker's (its invalidations, its looks) would take some of the drops
	// meant for the releases' replies.
	p.c = bwClient(t, p.rdb, rlock.WithWatchdogTimeout(5*time.Minute), rlock.WithTracking(false))
	return p
}

// warm takes and releases name once, so that the scripts are loaded and an idle
// connection is in the pool: the reply dropped later is a script's own.
func (p *bwProxied) warm(t *testing.T, name string) {
	t.Helper()
	l, err := p.c.NewMutex(name).TryLock(bwCtx(t, bwOwner(), bwCallTimeout))
	require.NoError(t, err)
	_, err = bwUnlock(t, "warm-up Unlock", l)
	require.NoError(t, err)
}

// awaitQuietWaiter waits until one client is subscribed to name's channel (the
// waiter) and the client behind the proxy has sent nothing for three polls in a
// row, with no command in flight: the waiter is subscribed, confirmed and idle.
func (p *bwProxied) awaitQuietWaiter(t *testing.T, name string) {
	t.Helper()
	ch := lua.ChannelName(name)
	stable, last := 0, -1
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		m, err := p.direct.PubSubNumSub(ctx, ch).Result()
		n := p.log.len()
		if err != nil || m[ch] != 1 || p.log.inflight.Load() != 0 || n != last {
			stable, last = 0, n
			return false
		}
		stable++
		return stable >= 3
	}, 5*time.Second, 20*time.Millisecond, "the waiter never subscribed and fell quiet")
}

// unlockLosingReply unlocks l while the proxy swallows the next reply chunk from
// the server. It returns Unlock's error and whether the swallowed chunk was the
// reply of Unlock's release script: exactly one chunk was swallowed and a release
// script run by the client failed with a timeout.
func (p *bwProxied) unlockLosingReply(t *testing.T, who string, l *rlock.Lease) (bool, error) {
	t.Helper()
	before := p.proxy.Dropped()
	mark := p.log.len()
	p.proxy.DropReplies(1)
	took, err := bwUnlock(t, who, l)
	p.proxy.DropReplies(0) // disarm, if the drop did not happen
	cmds := p.log.since(mark)
	dropped := p.proxy.Dropped() - before
	hit := false
	for _, c := range cmds {
		if c.release && bwTimeout(c.err) {
			hit = err != nil && dropped == 1
		}
	}
	t.Logf("%s with its reply dropped returned after %v: %v (chunks dropped: %d; commands completed meanwhile: %v)",
		who, bwMs(took), err, dropped, cmds)
	return hit, err
}

// bwProxiedMutex returns a fresh proxied client, a unique lock name (deleted at
// the end) whose scripts are already loaded, and a Mutex on it.
func bwProxiedMutex(t *testing.T) (*bwProxied, string, *rlock.Mutex) {
	p := bwNewProxied(t)
	name := redistest.Name(t)
	bwDelAtEnd(t, p.direct, name)
	p.warm(t, name)
	return p, name, p.c.NewMutex(name)
}

// 6. Retried Unlock after a lost reply, for each outcome of a release.
func TestBoundedUnlockRetryAfterLostReply(t *testing.T) {
	t.Run("Partial", func(t *testing.T) {
		p, name, m := bwProxiedMutex(t)
		ctx := bwCtx(t, bwOwner(), bwCallTimeout)
		l1, err := m.TryLock(ctx)
		require.NoError(t, err)
		l2, err := m.TryLock(ctx)
		require.NoError(t, err)

		hit, err := p.unlockLosingReply(t, "the partial Unlock", l2)
		require.Error(t, err)
		require.True(t, hit, "the dropped reply was not the release's")
		require.ErrorIs(t, l2.Err(), rlock.ErrUnlockUnconfirmed, "the failed Unlock ended the lease")
		took, err := bwUnlock(t, "the retried partial Unlock", l2)
		t.Logf("the retried partial Unlock returned after %v: %v", bwMs(took), err)
		require.ErrorIs(t, err, rlock.ErrUnlockUnconfirmed, "a partial release is not sent again: the owner's other lease keeps the hold")
		require.NoError(t, l1.Err(), "the owner's other lease is still held")
		n, err := m.HoldCount(ctx)
		require.NoError(t, err)
		t.Logf("hold count after the unconfirmed partial release: %d (1 if it ran, 2 if not)", n)
		require.Contains(t, []int{1, 2}, n)
		_, err = bwUnlock(t, "the last Unlock", l1) // gives back whatever the owner holds
		require.NoError(t, err)
		bwRequireGone(t, p.direct, name)
	})

	t.Run("Released", func(t *testing.T) {
		p, name, m := bwProxiedMutex(t)
		ctx := bwCtx(t, bwOwner(), bwCallTimeout)
		l, err := m.TryLock(ctx)
		require.NoError(t, err)

		hit, err := p.unlockLosingReply(t, "the final Unlock", l)
		require.Error(t, err)
		require.True(t, hit, "the dropped reply was not the release's")
		took, err := bwUnlock(t, "the retried final Unlock", l)
		t.Logf("the retried final Unlock returned after %v: %v", bwMs(took), err)
		require.NoError(t, err, "the retry must be recognised (ErrNotHeld is wrong too)")
		bwRequireGone(t, p.direct, name)
	})

	t.Run("HandedOff", func(t *testing.T) {
		for round := 1; round <= 4; round++ {
			t.Run(fmt.Sprintf("round%d", round), func(t *testing.T) {
				for try := 1; !bwHandOffRound(t); try++ {
					require.Less(t, try, 3, "three inconclusive tries: the dropped chunk was never the release's reply")
				}
			})
		}
	})
}

// bwHandOffRound: owner A holds the lock, owner B of the same client waits for
// it; A's final Unlock hands the lock to B but its reply is lost. A retries: no
// panic, no hang, nil; B gets its lease; B is the only holder. It returns false
// when the dropped chunk was not the release's reply (A's Unlock succeeded): the
// caller tries again, on a fresh proxy and client.
func bwHandOffRound(t *testing.T) bool {
	p, name, m := bwProxiedMutex(t)
	ownerB := bwOwner()
	lA, err := m.TryLock(bwCtx(t, bwOwner(), bwCallTimeout))
	require.NoError(t, err)
	callB := bwStart(t, "B", ownerB, func(ctx context.Context) (*rlock.Lease, error) { return m.Lock(ctx) })
	p.awaitQuietWaiter(t, name)

	hit, err := p.unlockLosingReply(t, "A's final Unlock", lA)
	failed := time.Now()
	if !hit {
		require.NoError(t, err, "A's Unlock failed, but not because its release's reply was dropped")
		t.Logf("inconclusive: the dropped chunk was not the release's reply; trying again")
		if lB := callB.expectLease(t, failed, 2*time.Second, "A's Unlock"); lB != nil {
			_, err := bwUnlock(t, "B's Unlock", lB)
			require.NoError(t, err)
		}
		return false
	}

	took, err := bwUnlock(t, "A's retried Unlock", lA)
	t.Logf("A's retried Unlock returned after %v: %v", bwMs(took), err)
	if err != nil {
		t.Errorf("A's retried Unlock: %v; want nil (the retry must be recognised)", err)
	}
	lB := callB.expectLease(t, failed, 2*time.Second, "A's failed Unlock")
	fields := holders(t, p.direct, name)
	t.Logf("holders after the hand-off: %v", fields)
	require.Len(t, fields, 1, "exactly one holder")
	n, err := m.HoldCount(bwCtx(t, ownerB, bwUnlockTimeout))
	require.NoError(t, err)
	require.Equal(t, 1, n, "the one holder is B, once")
	require.NotNil(t, lB)
	_, err = bwUnlock(t, "B's Unlock", lB)
	require.NoError(t, err)
	bwRequireGone(t, p.direct, name)
	return true
}

// 7. The client's idea of an owner's holds meets Redis': a hold Redis has and
// the client does not know of is adopted; holds Redis no longer has are lost.
func TestBoundedResync(t *testing.T) {
	for _, extra := range []int64{1, 2} {
		t.Run(fmt.Sprintf("HiddenHolds%d", extra), func(t *testing.T) {
			admin := redistest.Shared(t).Client(t)
			name := redistest.Name(t)
			bwDelAtEnd(t, admin, name)
			c := bwClient(t, admin)
			m := c.NewMutex(name)
			ctx := bwCtx(t, bwOwner(), bwCallTimeout)
			l1, err := m.TryLock(ctx)
			require.NoError(t, err)
			fields := holders(t, admin, name)
			require.Len(t, fields, 1)
			var field string
			for f := range fields {
				field = f
			}
			// A hold left by an acquisition whose reply was lost.
			require.NoError(t, admin.HIncrBy(context.Background(), name, field, extra).Err())

			l2, err := m.TryLock(ctx)
			require.NoError(t, err, "the reentrant TryLock after a hidden hold")
			n, err := m.HoldCount(ctx)
			require.NoError(t, err)
			t.Logf("hold count in Redis after the reentrant TryLock: %d (holds taken: 1 before, %d hidden, 1 now)", n, extra)
			require.GreaterOrEqual(t, n, 2)
			_, err = bwUnlock(t, "the second lease's Unlock", l2)
			require.NoError(t, err)
			_, err = bwUnlock(t, "the first lease's Unlock", l1)
			require.NoError(t, err)
			bwRequireGone(t, admin, name)
		})
	}

	t.Run("FieldDeletedAndTakenOver", func(t *testing.T) {
		admin := redistest.Shared(t).Client(t)
		name := redistest.Name(t)
		bwDelAtEnd(t, admin, name)
		c, other := bwClient(t, admin), bwClient(t, admin)
		m := c.NewMutex(name)
		ctx := bwCtx(t, bwOwner(), bwCallTimeout)
		l1, err := m.TryLock(ctx)
		require.NoError(t, err)
		fields := holders(t, admin, name)
		require.Len(t, fields, 1)
		for f := range fields {
			require.NoError(t, admin.HDel(context.Background(), name, f).Err())
		}
		lo, err := other.NewMutex(name).TryLock(bwCtx(t, bwOwner(), bwCallTimeout))
		require.NoError(t, err, "another client takes the lock")

		l2, err := m.TryLock(ctx)
		if l2 != nil {
			_, uerr := bwUnlock(t, "the unexpected lease's Unlock", l2)
			t.Logf("unexpected lease unlocked: %v", uerr)
		}
		t.Logf("the reentrant TryLock after the field was deleted: %v", err)
		require.ErrorIs(t, err, rlock.ErrLockLost)
		select {
		case <-l1.Done():
			require.ErrorIs(t, l1.Err(), rlock.ErrLockLost)
		case <-time.After(time.Second):
			t.Fatalf("the first lease is still open (Err %v)", l1.Err())
		}
		_, err = bwUnlock(t, "the other client's Unlock", lo)
		require.NoError(t, err)
		bwRequireGone(t, admin, name)
	})
}
