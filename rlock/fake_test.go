package rlock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/pubsub"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// fakeLock is an in-memory model of one lock hash in Redis, with the contracts of
// lua/acquire.lua and lua/release.lua (hold count, expected count, unlock latch,
// hand-off to a successor, publish on release), and of the release channel's
// subscriptions (fakeSub). It serves every name it is asked about as the same lock:
// each test uses one name per fakeLock.
type fakeLock struct {
	mu      sync.Mutex
	holder  string                        // the owner field; "" when the lock is free
	count   int64                         // the holder's hold count
	expiry  time.Time                     // when the key expires; zero: no expiry
	ttl     time.Duration                 // when > 0, the TTL a refused acquire answers instead of the remaining time
	latches map[string]lua.ReleaseOutcome // unlock latches by request id
	subs    map[*fakeSub]struct{}         // open subscriptions of the channel

	manualConfirm bool // subscriptions are confirmed by confirmAll, not at once
	hooks         fakeHooks

	acquires int
	outcomes map[lua.ReleaseOutcome]int
	log      []releaseRecord
}

// fakeHooks let a test step into the fake's calls. The before hooks run without
// the fake's lock held and may block; a non-nil error fails the call before it
// had any effect. The after hooks run after the effect, and a non-nil error
// replaces the reply (the call ran, its reply was lost).
type fakeHooks struct {
	beforeAcquire func(context.Context, lua.AcquireArgs) error
	afterAcquire  func(lua.AcquireArgs, lua.AcquireReply) error
	beforeRelease func(context.Context, lua.ReleaseArgs) error
	afterRelease  func(lua.ReleaseArgs, lua.ReleaseReply) error
}

// releaseRecord is one release call the fake executed.
type releaseRecord struct {
	args  lua.ReleaseArgs
	reply lua.ReleaseReply
}

func newFakeLock() *fakeLock {
	return &fakeLock{
		latches:  make(map[string]lua.ReleaseOutcome),
		subs:     make(map[*fakeSub]struct{}),
		outcomes: make(map[lua.ReleaseOutcome]int),
	}
}

// backend returns the Client's seam served by the fake.
func (f *fakeLock) backend() backend {
	return backend{acquire: f.acquire, release: f.release, releaseAll: f.releaseAll, subscribe: f.subscribe}
}

// releaseAll serves Close's pipelined releases one by one.
func (f *fakeLock) releaseAll(ctx context.Context, as []lua.ReleaseArgs) ([]lua.ReleaseReply, []error) {
	replies, errs := make([]lua.ReleaseReply, len(as)), make([]error, len(as))
	for i, a := range as {
		replies[i], errs[i] = f.release(ctx, a)
	}
	return replies, errs
}

func (f *fakeLock) setHooks(h fakeHooks) {
	f.mu.Lock()
	f.hooks = h
	f.mu.Unlock()
}

func (f *fakeLock) getHooks() fakeHooks {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hooks
}

// aliveLocked reports whether the lock is held, dropping an expired holder. f.mu
// must be held.
func (f *fakeLock) aliveLocked(now time.Time) bool {
	if f.holder != "" && !f.expiry.IsZero() && !now.Before(f.expiry) {
		f.holder, f.count, f.expiry = "", 0, time.Time{}
	}
	return f.holder != ""
}

// countOf returns field's hold count. f.mu must be held.
func (f *fakeLock) countOf(field string, now time.Time) int64 {
	if f.aliveLocked(now) && f.holder == field {
		return f.count
	}
	return 0
}

func (f *fakeLock) acquire(ctx context.Context, a lua.AcquireArgs) (lua.AcquireReply, error) {
	h := f.getHooks()
	return fakeCall(ctx, a, h.beforeAcquire, h.afterAcquire, func(a lua.AcquireArgs) lua.AcquireReply {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.acquireLocked(a)
	})
}

// fakeCall is one call of a fake script, run: nothing is sent when ctx has
// ended; the hooks before and after (when not nil) run around it and their
// error is the call's; a caller whose ctx ended meanwhile gets ctx's error
// though the script ran (it stopped waiting for the reply).
func fakeCall[A, R any](ctx context.Context, a A, before func(context.Context, A) error, after func(A, R) error, run func(A) R) (R, error) {
	var none R
	if err := ctx.Err(); err != nil {
		return none, err // not sent
	}
	if before != nil {
		if err := before(ctx, a); err != nil {
			return none, err
		}
	}
	r := run(a)
	if after != nil {
		if err := after(a, r); err != nil {
			return none, err
		}
	}
	if err := ctx.Err(); err != nil {
		return none, err
	}
	return r, nil
}

// acquireLocked is acquire.lua. f.mu must be held.
func (f *fakeLock) acquireLocked(a lua.AcquireArgs) lua.AcquireReply {
	f.acquires++
	now := time.Now()
	if !f.aliveLocked(now) {
		if a.Expected > 0 {
			return lua.AcquireReply{Resync: true, Count: 0}
		}
		f.holder, f.count, f.expiry = a.Field.String(), 1, now.Add(a.Lease.Duration())
		return lua.AcquireReply{Acquired: true}
	}
	n := f.countOf(a.Field.String(), now)
	switch {
	case n == a.Expected+1: // a hand-off to this owner, or a retry
		f.expiry = now.Add(a.Lease.Duration())
		return lua.AcquireReply{Acquired: true}
	case n != a.Expected:
		return lua.AcquireReply{Resync: true, Count: n}
	case n == 0:
		switch {
		case f.ttl > 0:
			return lua.AcquireReply{TTL: f.ttl}
		case f.expiry.IsZero():
			return lua.AcquireReply{TTL: -1}
		}
		return lua.AcquireReply{TTL: f.expiry.Sub(now).Truncate(time.Millisecond)}
	}
	f.count++
	f.expiry = now.Add(a.Lease.Duration())
	return lua.AcquireReply{Acquired: true}
}

func (f *fakeLock) release(ctx context.Context, a lua.ReleaseArgs) (lua.ReleaseReply, error) {
	h := f.getHooks()
	return fakeCall(ctx, a, h.beforeRelease, h.afterRelease, func(a lua.ReleaseArgs) lua.ReleaseReply {
		f.mu.Lock()
		defer f.mu.Unlock()
		r := f.releaseLocked(a)
		f.outcomes[r.Outcome]++
		f.log = append(f.log, releaseRecord{args: a, reply: r})
		return r
	})
}

// releaseLocked is release.lua. f.mu must be held.
func (f *fakeLock) releaseLocked(a lua.ReleaseArgs) lua.ReleaseReply {
	now := time.Now()
	k, c := max(a.Levels, 1), a.Expected
	n := f.countOf(a.Field.String(), now)
	if k < c {
		switch {
		case n == c:
			f.count -= k
			f.expiry = now.Add(a.Lease.Duration())
			return lua.ReleaseReply{Outcome: lua.Partial}
		case n > 0 && n == c-k:
			return lua.ReleaseReply{Outcome: lua.Partial}
		case n == 0:
			return lua.ReleaseReply{Outcome: lua.NotHeld}
		}
		return lua.ReleaseReply{Outcome: lua.Resync, Count: n}
	}
	if n == 0 { // HDEL found no field: the latch answers a retry as the first call
		if o, ok := f.latches[a.Latch]; ok {
			return lua.ReleaseReply{Outcome: o}
		}
		return lua.ReleaseReply{Outcome: lua.NotHeld}
	}
	f.holder, f.count, f.expiry = "", 0, time.Time{} // the only field: the key is gone
	if a.Successor.String() != "" && (a.Streak == 0 || len(f.subs) <= 1 || len(f.subs)-1 > a.Streak) {
		f.holder, f.count, f.expiry = a.Successor.String(), 1, now.Add(a.SuccessorLease.Duration())
		f.latches[a.Latch] = lua.HandedOff
		return lua.ReleaseReply{Outcome: lua.HandedOff}
	}
	f.publishLocked()
	f.latches[a.Latch] = lua.Released
	return lua.ReleaseReply{Outcome: lua.Released}
}

// publishLocked delivers a release message: a token to every subscription. f.mu
// must be held.
func (f *fakeLock) publishLocked() {
	for s := range f.subs {
		select {
		case s.token <- pubsub.WakeMessage:
		default:
		}
	}
}

// subscribe ignores ctx, as pubsub.Hub.Subscribe does.
func (f *fakeLock) subscribe(_ context.Context, channel string) (subscription, error) {
	s := &fakeSub{f: f, channel: channel, confirmed: make(chan struct{}), token: make(chan pubsub.Wake, 1)}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subs[s] = struct{}{}
	if !f.manualConfirm {
		s.confirm()
	}
	return s, nil
}

// confirmAll confirms every open subscription.
func (f *fakeLock) confirmAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.subs {
		s.confirm()
	}
}

// holdBy makes field the holder, count times, for ttl (<= 0: no expiry).
func (f *fakeLock) holdBy(field string, count int64, ttl time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holder, f.count, f.expiry = field, count, time.Time{}
	if ttl > 0 {
		f.expiry = time.Now().Add(ttl)
	}
}

// releaseForeign deletes the lock and publishes the release, as another
// process's unlock does.
func (f *fakeLock) releaseForeign() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holder, f.count, f.expiry = "", 0, time.Time{}
	f.publishLocked()
}

// free deletes the lock without publishing (an expiry, or a DEL by someone else).
func (f *fakeLock) free() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holder, f.count, f.expiry = "", 0, time.Time{}
}

// state returns the holder and its count; "" and 0 when the lock is free.
func (f *fakeLock) state() (string, int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.aliveLocked(time.Now())
	return f.holder, f.count
}

func (f *fakeLock) isFree() bool {
	holder, _ := f.state()
	return holder == ""
}

func (f *fakeLock) acquireCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.acquires
}

func (f *fakeLock) outcome(o lua.ReleaseOutcome) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.outcomes[o]
}

func (f *fakeLock) openSubs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

func (f *fakeLock) releaseLog() []releaseRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]releaseRecord(nil), f.log...)
}

// fakeSub is one subscription to the fake lock's release channel.
type fakeSub struct {
	f         *fakeLock
	channel   string
	confirmed chan struct{}
	token     chan pubsub.Wake // buffered 1, fed by publishLocked
	once      sync.Once
}

func (s *fakeSub) confirm() { s.once.Do(func() { close(s.confirmed) }) }

func (s *fakeSub) Confirmed() <-chan struct{} { return s.confirmed }
func (s *fakeSub) Ready() <-chan pubsub.Wake  { return s.token }

func (s *fakeSub) Close() {
	s.f.mu.Lock()
	delete(s.f.subs, s)
	s.f.mu.Unlock()
}

// gate blocks the calls that pass it until the test opens it; entered is closed
// when the first call arrives. A test's cleanup opens it, so that nothing stays
// blocked after a failure.
type gate struct {
	entered  chan struct{}
	open     chan struct{}
	inOnce   sync.Once
	openOnce sync.Once
}

func newGate(t *testing.T) *gate {
	g := &gate{entered: make(chan struct{}), open: make(chan struct{})}
	t.Cleanup(g.release)
	return g
}

func (g *gate) pass() {
	g.inOnce.Do(func() { close(g.entered) })
	<-g.open
}

func (g *gate) release() { g.openOnce.Do(func() { close(g.open) }) }

// waitEntered waits until a call is blocked in the gate.
func (g *gate) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(2 * time.Second):
		t.Fatal("no call reached the gate within 2s")
	}
}

// newFakeClient returns a Client whose lock path is served by f, with a watchdog
// timeout long enough that no renewal is due during a test; it is closed at the
// end of the test.
func newFakeClient(t *testing.T, f *fakeLock, opts ...ClientOption) *Client {
	t.Helper()
	rdb, _ := noServer(t)
	return newFakeClientOn(t, rdb, f, opts...)
}

// newFakePair returns a new fake lock and a client of it (newFakeClient).
func newFakePair(t *testing.T, opts ...ClientOption) (*fakeLock, *Client) {
	t.Helper()
	f := newFakeLock()
	return f, newFakeClient(t, f, opts...)
}

func newFakeClientOn(t *testing.T, rdb *redis.Client, f *fakeLock, opts ...ClientOption) *Client {
	t.Helper()
	c, err := New(rdb, append([]ClientOption{WithWatchdogTimeout(time.Minute)}, opts...)...)
	require.NoError(t, err)
	c.backend = f.backend()
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// lockResult is what a Lock call running in a goroutine returned.
type lockResult struct {
	l   *Lease
	err error
}

// lockAsync runs m.Lock(ctx, opts...) in a goroutine; its result arrives on the
// returned channel.
func lockAsync(ctx context.Context, m *Mutex, opts ...AcquireOption) <-chan lockResult {
	ch := make(chan lockResult, 1)
	go func() {
		l, err := m.Lock(ctx, opts...)
		ch <- lockResult{l, err}
	}()
	return ch
}

// result waits up to d for a Lock result.
func result(t *testing.T, ch <-chan lockResult, d time.Duration) lockResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("Lock did not return within %v", d)
		return lockResult{}
	}
}

// queueLen returns the length of name's queue in c, 0 when c has no entry.
func queueLen(c *Client, name string) int {
	c.locks.mu.Lock()
	defer c.locks.mu.Unlock()
	if e := c.locks.entries[name]; e != nil {
		return len(e.queue)
	}
	return 0
}

// tableLen returns how many locks c holds or waits for.
func tableLen(c *Client) int {
	c.locks.mu.Lock()
	defer c.locks.mu.Unlock()
	return len(c.locks.entries)
}

// headSleeping reports whether name's head is asleep: subscribed, not
// attempting, no hand-off in flight, and its next attempt at least d away.
func headSleeping(c *Client, name string, d time.Duration) bool {
	c.locks.mu.Lock()
	defer c.locks.mu.Unlock()
	e := c.locks.entries[name]
	return e != nil && len(e.queue) > 0 && e.sub != nil && !e.attempting && e.handing == nil &&
		!e.attemptAt.IsZero() && time.Until(e.attemptAt) > d
}

// holdOfCtx returns the hold of ctx's owner on name, or nil.
func holdOfCtx(c *Client, ctx context.Context, name string) *hold {
	c.locks.mu.Lock()
	defer c.locks.mu.Unlock()
	e := c.locks.entries[name]
	if e == nil {
		return nil
	}
	return e.holdOf(ownerFrom(ctx))
}

// replyError is an error reply from Redis (a redis.Error): the command ran and
// failed without effect.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}
