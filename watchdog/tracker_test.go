package watchdog

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// The tracker's decisions, without a server: a fake node answers its looks,
// a fake clock keeps its time, and each test ticks the checker itself (due,
// then look: one pass of its goroutine, which is not started).

// fakeClock is a clock that moves only when told.
type fakeClock struct {
	mu    sync.Mutex
	t     time.Time
	later []fakeTimer
}

type fakeTimer struct {
	at time.Time
	f  func()
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) afterFunc(d time.Duration, f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.later = append(c.later, fakeTimer{c.t.Add(d), f})
}

// advance moves the clock by d and runs the functions due by then.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	var due []func()
	c.later = slices.DeleteFunc(c.later, func(ft fakeTimer) bool {
		if ft.at.After(c.t) {
			return false
		}
		due = append(due, ft.f)
		return true
	})
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

// fakeNode is every node (servers and server): it records the looks and
// answers them from left (NoTimeout for a hold not in it).
type fakeNode struct {
	mu      sync.Mutex
	refused bool
	down    bool                  // looks do not reach it
	left    map[lua.Renewal]int64 // what a look says of a hold
	looks   [][]lua.Renewal       // every look that reached it, its holds
	reads   [][]string            // every read of followed keys, its keys
}

var errDown = errors.New("fake node: connection refused")

func (n *fakeNode) of(context.Context, string) (server, error) { return n, nil }
func (n *fakeNode) primaryIs(string) bool                      { return false }
func (n *fakeNode) close()                                     {}
func (n *fakeNode) conn() pipeliner                            { return nil }

// setDown makes looks not reach the node (down), or reach it again.
func (n *fakeNode) setDown(down bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down = down
}

func (n *fakeNode) tracks() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !n.refused
}

func (n *fakeNode) look(_ context.Context, batches [][]lua.Renewal, _ time.Time) ([][]int64, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.down {
		return make([][]int64, len(batches)), errDown
	}
	out := make([][]int64, len(batches))
	var all []lua.Renewal
	for i, b := range batches {
		for _, r := range b {
			v, ok := n.left[r]
			if !ok {
				v = lua.NoTimeout
			}
			out[i] = append(out[i], v)
		}
		all = append(all, b...)
	}
	n.looks = append(n.looks, all)
	return out, nil
}

// read records the read and says every key is gone (news).
func (n *fakeNode) read(_ context.Context, ks []string, keys map[string]unread) (map[string]Read, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.reads = append(n.reads, slices.Sorted(slices.Values(ks)))
	news := make(map[string]Read)
	for _, k := range ks {
		news[k] = Read{At: keys[k].at}
	}
	return news, nil
}

// takeReads returns the reads of followed keys made since the last call.
func (n *fakeNode) takeReads() [][]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.reads
	n.reads = nil
	return out
}

// set makes the node's looks say left of r.
func (n *fakeNode) set(r lua.Renewal, left int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.left[r] = left
}

// takeLooks returns the looks made since the last call.
func (n *fakeNode) takeLooks() [][]lua.Renewal {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.looks
	n.looks = nil
	return out
}

// trackerTest is a watchdog whose tracker asks node and keeps time with clk.
type trackerTest struct {
	w    *Watchdog
	trk  *tracker
	node *fakeNode
	clk  *fakeClock
}

const testDelay = 2 * time.Millisecond

// newTrackerTest returns a tracker test whose watchdog is closed, and its
// goroutines checked gone, when t ends.
func newTrackerTest(t *testing.T) *trackerTest {
	ignore := goleak.IgnoreCurrent() // the package's other tests' go-redis dialers, say
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never used: fixed leases are not renewed
	w := newWatchdog(rdb, Options{Timeout: time.Hour, Track: true, TrackDelay: testDelay})
	clk := &fakeClock{t: time.Now()}
	trk := newTrackerOf(w, clk)
	node := &fakeNode{left: make(map[lua.Renewal]int64)}
	trk.nodes = node
	close(trk.done) // no checker goroutine: the test ticks
	w.trk = trk
	w.start()
	t.Cleanup(func() {
		w.Close()
		_ = rdb.Close()
	})
	return &trackerTest{w: w, trk: trk, node: node, clk: clk}
}

// tick runs one pass of the checker now, and returns when it would tick next.
func (tt *trackerTest) tick() time.Duration {
	holds, next := tt.trk.due(tt.clk.now())
	tt.trk.look(holds)
	return next
}

// after advances the clock by d and ticks.
func (tt *trackerTest) after(d time.Duration) time.Duration {
	tt.clk.advance(d)
	return tt.tick()
}

// watch watches a fixed lease of an hour on key, whose losses go to lost.
func (tt *trackerTest) watch(key string, lost chan<- error) (*Hold, lua.Renewal) {
	r := lua.Renewal{Key: key, Member: "owner:1"}
	h := tt.w.Watch(r, tt.clk.now().Add(time.Hour), false, lua.Acks{}, func(err error) { lost <- err })
	return h, r
}

// looked fails unless the looks since the last call are want, one each.
func (tt *trackerTest) looked(t *testing.T, want ...[]lua.Renewal) {
	t.Helper()
	got := tt.node.takeLooks()
	if len(got) != len(want) {
		t.Fatalf("%d looks %v, want %d %v", len(got), got, len(want), want)
	}
	for i := range got {
		slices.SortFunc(got[i], func(a, b lua.Renewal) int { return strings.Compare(a.Key, b.Key) })
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("look %d at %v, want %v", i, got[i], want[i])
		}
	}
}

// seen is a tracker test whose holds a and b (keys "a" and "b") had their
// first look.
func seen(t *testing.T) (tt *trackerTest, a, b lua.Renewal, lost chan error) {
	tt = newTrackerTest(t)
	lost = make(chan error, 2)
	_, a = tt.watch("a", lost)
	_, b = tt.watch("b", lost)
	tt.after(testDelay)
	tt.looked(t, []lua.Renewal{a, b})
	return tt, a, b, lost
}

// A new hold is looked at once it is the delay old, not before.
func TestTrackerLooksAtNewHoldAfterDelay(t *testing.T) {
	tt := newTrackerTest(t)
	_, r := tt.watch("k", make(chan error, 1))
	next := tt.tick()
	tt.looked(t)
	if next < testDelay {
		t.Fatalf("next tick in %v, before the new hold is due (%v)", next, testDelay)
	}
	tt.after(testDelay)
	tt.looked(t, []lua.Renewal{r})
}

// The new holds due at one tick are looked at together, in one look.
func TestTrackerLooksAtNewHoldsTogether(t *testing.T) {
	tt := newTrackerTest(t)
	_, a := tt.watch("a", make(chan error, 1))
	tt.clk.advance(testDelay / 2)
	_, b := tt.watch("b", make(chan error, 1))
	tt.after(testDelay)
	tt.looked(t, []lua.Renewal{a, b})
}

// A hold that ends before its first look is never looked at.
func TestTrackerSkipsHoldEndedYoung(t *testing.T) {
	tt := newTrackerTest(t)
	h, _ := tt.watch("k", make(chan error, 1))
	h.Stop()
	tt.after(testDelay)
	tt.looked(t)
}

// News of a key (an invalidation) makes a look at the holds of that key, and
// of no other.
func TestTrackerNewsLooksAtKeysHolds(t *testing.T) {
	tt, a, _, _ := seen(t)
	tt.trk.changed([]string{"a"})
	tt.tick()
	tt.looked(t, []lua.Renewal{a})
}

// News of a key does not make a look at a new hold of that key: its own
// look, once due, reads what the change did.
func TestTrackerNewsLeavesNewHoldAlone(t *testing.T) {
	tt := newTrackerTest(t)
	_, r := tt.watch("k", make(chan error, 1))
	tt.trk.changed([]string{"k"})
	tt.tick()
	tt.looked(t)
	tt.after(testDelay)
	tt.looked(t, []lua.Renewal{r})
}

// A look that finds a hold gone ends it: OnLost with ErrInvalidated, and the
// watchdog watches it no more.
func TestTrackerGoneEndsHold(t *testing.T) {
	tt, a, _, lost := seen(t)
	tt.node.set(a, lua.Gone)
	tt.trk.changed([]string{"a"})
	tt.tick()
	select {
	case err := <-lost:
		if !errors.Is(err, ErrInvalidated) {
			t.Fatalf("lost with %v, want ErrInvalidated", err)
		}
	default:
		t.Fatal("a hold found gone was not reported lost")
	}
	if hs := tt.w.Holds(a); len(hs) != 0 {
		t.Fatalf("a lost hold is still watched: %v", hs)
	}
}

// A look that finds a hold's lease cut short brings its deadline forward,
// and the hold then ends with ErrShortened.
func TestTrackerCutLeaseEndsShortened(t *testing.T) {
	tt, a, _, _ := seen(t)
	tt.node.set(a, time.Minute.Milliseconds())
	tt.trk.changed([]string{"a"})
	sent := tt.clk.now()
	tt.tick()
	h := tt.w.Holds(a)[0]
	if d, want := h.Deadline(), sent.Add(time.Minute); !d.Equal(want) {
		t.Fatalf("deadline %v, want %v", d, want)
	}
	if err := h.Overdue(sent.Add(time.Minute)); err != ErrShortened {
		t.Fatalf("overdue with %v, want ErrShortened", err)
	}
}

// News of every key (a reconnect, a flush) makes a look at every hold, new
// ones included.
func TestTrackerReconnectLooksAtEveryHold(t *testing.T) {
	tt, a, b, _ := seen(t)
	_, c := tt.watch("c", make(chan error, 1))
	tt.trk.changed(nil)
	tt.tick()
	tt.looked(t, []lua.Renewal{a, b, c})
}

// A hold whose release is in flight is not looked at, even on news of every
// key.
func TestTrackerSkipsReleasingHold(t *testing.T) {
	tt, a, _, _ := seen(t)
	tt.w.Holds(a)[0].SetReleasing(true)
	tt.trk.changed([]string{"a"})
	tt.tick()
	tt.looked(t)
}

// A node that refused tracking is not asked: the renewals alone look.
func TestTrackerSkipsRefusedNode(t *testing.T) {
	tt := newTrackerTest(t)
	tt.node.refused = true
	tt.watch("k", make(chan error, 1))
	tt.after(testDelay)
	tt.trk.changed(nil)
	tt.tick()
	tt.looked(t)
}

// A look that did not reach the server is tried again after retryPause, not
// before, and the checker ticks by then.
func TestTrackerRetriesUnreachedLook(t *testing.T) {
	tt, a, _, _ := seen(t)
	tt.node.setDown(true)
	tt.trk.changed([]string{"a"})
	tt.tick()
	tt.node.setDown(false)
	next := tt.tick()
	tt.looked(t)
	if next <= 0 || next > retryPause {
		t.Fatalf("next tick in %v, want by retryPause (%v)", next, retryPause)
	}
	tt.after(retryPause)
	tt.looked(t, []lua.Renewal{a})
}

// A hold whose owner changed its key (Update) is looked at again, as a new
// one: after the delay.
func TestTrackerUpdateLooksAgain(t *testing.T) {
	tt, a, _, _ := seen(t)
	tt.w.Holds(a)[0].Update(tt.clk.now().Add(time.Hour), false)
	tt.tick()
	tt.looked(t)
	tt.after(testDelay)
	tt.looked(t, []lua.Renewal{a})
}

// The first new hold wakes the checker; the next ones, while it ticks, do
// not: the caller's path pokes no goroutine.
func TestTrackerPokesOnlyWhenNotTicking(t *testing.T) {
	tt := newTrackerTest(t)
	tt.watch("a", make(chan error, 1))
	if !poked(tt.trk) {
		t.Fatal("the first new hold did not wake the checker")
	}
	tt.watch("b", make(chan error, 1))
	if poked(tt.trk) {
		t.Fatal("a new hold woke the checker while it ticks")
	}
}

func poked(trk *tracker) bool {
	select {
	case <-trk.poke:
		return true
	default:
		return false
	}
}

// Idle, with no new holds and none to look at, the checker stops ticking
// after idleTicks ticks; the next new hold wakes it again.
func TestTrackerStopsTickingWhenIdle(t *testing.T) {
	tt := newTrackerTest(t)
	h, _ := tt.watch("k", make(chan error, 1))
	h.Stop() // a short hold: it ends young
	poked(tt.trk)
	ticks := 1
	for next := tt.tick(); next > 0; next = tt.tick() {
		if ticks++; ticks > 10*idleTicks {
			t.Fatal("the checker never stops ticking")
		}
		tt.clk.advance(next)
	}
	if ticks != 1+idleTicks {
		t.Fatalf("stopped after %d ticks, want %d (one that saw the hold come, then idleTicks)", ticks, 1+idleTicks)
	}
	tt.watch("k", make(chan error, 1))
	if !poked(tt.trk) {
		t.Fatal("a new hold did not wake the stopped checker")
	}
}

// A tick that looked at new holds sets the next one a delay later; ticks
// that found none though new holds came double the gap, up to maxTickGaps
// delays.
func TestTickPolicyBacksOff(t *testing.T) {
	p := newTickPolicy(testDelay)
	p.arrived()
	want := []time.Duration{2, 4, 8, 16, 16}
	for i, w := range want {
		p.arrived()
		if got := p.next(false, true); got != w*testDelay {
			t.Fatalf("tick %d: gap %v, want %v", i, got, w*testDelay)
		}
	}
	if got := p.next(true, true); got != testDelay {
		t.Fatalf("gap %v after a tick that looked, want the delay %v", got, testDelay)
	}
}

// Holds waiting for a look (new, or to look at again) keep the checker
// ticking, however long it is idle.
func TestTickPolicyTicksWhileWaiting(t *testing.T) {
	p := newTickPolicy(testDelay)
	p.arrived()
	for i := range 10 * idleTicks {
		if p.next(false, true) == 0 {
			t.Fatalf("stopped at tick %d with holds waiting", i)
		}
	}
}

// A followed key is read when the Follow starts and after news of it, and
// its news is told; a change less than QuietFor after the last one is read
// QuietFor later, not at once.
func TestTrackerReadsFollowedKey(t *testing.T) {
	tt := newTrackerTest(t)
	told := make(chan Read, 10)
	stop := tt.w.Follow(&Follow{Key: "f", News: func(r Read) { told <- r }})
	defer stop()
	tt.tick()
	if got := tt.node.takeReads(); !slices.EqualFunc(got, [][]string{{"f"}}, slices.Equal) {
		t.Fatalf("reads %v when the Follow starts, want [[f]]", got)
	}
	if r := <-told; !r.At.Equal(tt.clk.now()) {
		t.Fatalf("news at %v, want %v", r.At, tt.clk.now())
	}
	tt.clk.advance(QuietFor)
	tt.trk.changed([]string{"f"})
	tt.tick()
	tt.clk.advance(QuietFor / 2)
	tt.trk.changed([]string{"f"}) // busy: put off
	tt.tick()
	if got := tt.node.takeReads(); len(got) != 1 {
		t.Fatalf("reads %v after two changes QuietFor/2 apart, want one", got)
	}
	tt.after(QuietFor)
	if got := tt.node.takeReads(); len(got) != 1 {
		t.Fatalf("reads %v QuietFor after the busy change, want one", got)
	}
}

// News that comes while a pass runs is kept for the next pass (and, under
// the race detector, touches nothing the pass reads).
func TestTrackerKeepsNewsDuringPass(t *testing.T) {
	tt, a, _, _ := seen(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				tt.trk.changed([]string{"a"})
			}
		}
	})
	for range 1000 {
		tt.tick()
	}
	close(stop)
	wg.Wait()
	tt.node.takeLooks()
	tt.trk.changed([]string{"a"})
	tt.tick()
	tt.looked(t, []lua.Renewal{a})
}
