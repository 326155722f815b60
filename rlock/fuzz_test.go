package rlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/redis/go-redis/v9"
)

// The fuzz targets of this package check option and argument validation:
// every invalid value gives ErrInvalidArgument before any round trip, every
// valid one reaches the network, and nothing panics. The client's server is a
// closed port behind a hook that refuses every command and dial itself, and
// counts them: a refused dial of a real closed port costs go-redis' five dial
// attempts, 100 ms apart, per call. The bugs these targets found (an
// exponential back-off that overflowed to a negative pause, an expirable
// acquisition of 1<<62 permits that panicked making its ids) are fixed; their
// inputs stay in the corpus.

// errOffline is what the fuzz targets' transport answers every command with.
var errOffline = errors.New("fuzz: offline (closed port)")

// offlineHook refuses every command and dial of a go-redis client, counting them.
type offlineHook struct{ sent atomic.Int64 }

func (h *offlineHook) DialHook(redis.DialHook) redis.DialHook {
	return func(context.Context, string, string) (net.Conn, error) {
		h.sent.Add(1)
		return nil, errOffline
	}
}

func (h *offlineHook) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(_ context.Context, cmd redis.Cmder) error {
		h.sent.Add(1)
		cmd.SetErr(errOffline)
		return errOffline
	}
}

func (h *offlineHook) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(_ context.Context, cmds []redis.Cmder) error {
		h.sent.Add(1)
		for _, cmd := range cmds {
			cmd.SetErr(errOffline)
		}
		return errOffline
	}
}

// offline returns a client of a closed port whose commands offlineHook refuses.
func offline(t *testing.T) (*redis.Client, *offlineHook) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1})
	h := new(offlineHook)
	rdb.AddHook(h)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb, h
}

// fuzzCall is one call of a fuzz target: what it is, whether its arguments are
// valid by the documentation, and whether a valid call needs Redis.
type fuzzCall struct {
	what    string
	invalid bool
	offline bool // a valid call answers without a round trip (Unlock with nothing held)
	run     func(ctx context.Context) error
}

// check makes each call and checks it: an invalid one returns
// ErrInvalidArgument and sends nothing; a valid one does not, and one that
// needs Redis reaches it and fails (with the transport's error, or, when its
// wait time ran out meanwhile, ErrNotAcquired).
func check(t *testing.T, h *offlineHook, calls []fuzzCall) {
	t.Helper()
	for _, c := range calls {
		ctx, cancel := context.WithTimeout(WithOwner(context.Background()), 5*time.Second)
		before := h.sent.Load()
		err := c.run(ctx)
		sent := h.sent.Load() - before
		cancel()
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			t.Errorf("%s: waited for its ctx instead of failing: %v", c.what, err)
		case c.invalid && !errors.Is(err, ErrInvalidArgument):
			t.Errorf("%s: invalid arguments, got %v, want ErrInvalidArgument", c.what, err)
		case c.invalid && sent > 0:
			t.Errorf("%s: invalid arguments, yet %d commands were sent", c.what, sent)
		case !c.invalid && errors.Is(err, ErrInvalidArgument):
			t.Errorf("%s: valid arguments refused: %v", c.what, err)
		case !c.invalid && !c.offline && (sent == 0 || err == nil):
			t.Errorf("%s: valid arguments, got %v after %d commands; want a round trip, and its failure", c.what, err, sent)
		}
	}
}

// Option sets passed to the targets: a bit per option, so that absent
// options (defaults) are fuzzed too.
const (
	optLease = 1 << iota
	optWait
	optAcks
)

// FuzzClientOptions: New with every ClientOption, each present or not, with
// any durations and counts. New returns ErrInvalidArgument exactly for the
// values the options' documentation excludes, sends nothing, and a client it
// returns reaches Redis on its first call and closes. The bits of set pass
// the options: 0-4 the durations, in the order of the arguments, 5
// WithReplicaAcks, 6 a nil logger and OnLost; bit 7 passes a nil client.
func FuzzClientOptions(f *testing.F) {
	const ms = int64(time.Millisecond)
	f.Add(uint8(0), int64(0), int64(0), int64(0), int64(0), int64(0), 0, int64(0))
	f.Add(uint8(0xff), 30_000*ms, 10_000*ms, 300_000*ms, 5_000*ms, 1_000*ms, 1, 1_000*ms)
	f.Add(uint8(0x03), 3*ms, ms, int64(0), int64(0), int64(0), 0, int64(0))
	f.Add(uint8(0x03), 3*ms-1, int64(0), int64(0), int64(0), int64(0), 0, int64(0))
	f.Add(uint8(0x02), int64(0), 30_000*ms, int64(0), int64(0), int64(0), 0, int64(0))
	f.Add(uint8(0x20), int64(0), int64(0), int64(0), int64(0), int64(0), -1, int64(0))
	f.Add(uint8(0x40), int64(0), int64(0), int64(0), int64(0), int64(0), 0, int64(0))
	f.Add(uint8(0x1f), int64(math.MaxInt64), int64(math.MaxInt64/3), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), 0, int64(0))
	f.Fuzz(func(t *testing.T, set uint8, wd, renew, fair, release, recheck int64, replicas int, ackTimeout int64) {
		rdb, h := offline(t)
		var opts []ClientOption
		var o struct{ wd, renew, fair, release, recheck, ackTimeout time.Duration }
		replicasSet := 0
		for i, opt := range []struct {
			v   int64
			d   *time.Duration
			new func(time.Duration) ClientOption
		}{
			{wd, &o.wd, WithWatchdogTimeout}, {renew, &o.renew, WithRenewInterval}, {fair, &o.fair, WithFairWaitTimeout},
			{release, &o.release, WithReleaseTimeout}, {recheck, &o.recheck, WithRecheckInterval},
		} {
			if set&(1<<i) != 0 {
				*opt.d = time.Duration(opt.v)
				opts = append(opts, opt.new(*opt.d))
			}
		}
		if set&(1<<5) != 0 {
			replicasSet, o.ackTimeout = replicas, time.Duration(ackTimeout)
			opts = append(opts, WithReplicaAcks(replicas, o.ackTimeout))
		}
		if set&(1<<6) != 0 {
			opts = append(opts, WithLogger(nil), WithOnLost(nil))
		}
		effWD := o.wd
		if effWD == 0 {
			effWD = DefaultWatchdogTimeout
		}
		effRenew := o.renew
		if effRenew == 0 {
			effRenew = effWD / 3
		}
		invalid := o.wd < 0 || o.renew < 0 || o.fair < 0 || o.release < 0 || o.recheck < 0 ||
			replicasSet < 0 || o.ackTimeout < 0 || effWD < 3*time.Millisecond || effRenew >= effWD
		nilClient := set&(1<<7) != 0
		var c *Client
		check(t, h, []fuzzCall{{what: fmt.Sprintf("New(nil client %v, %+v, %d replicas)", nilClient, o, replicasSet),
			invalid: invalid || nilClient, offline: true,
			run: func(context.Context) error {
				var err error
				if nilClient {
					c, err = New(nil, opts...)
				} else {
					c, err = New(rdb, opts...)
				}
				return err
			}}})
		if c == nil {
			return
		}
		check(t, h, []fuzzCall{{what: "TryLock on the new client",
			run: func(ctx context.Context) error { _, err := c.NewMutex("fuzz").TryLock(ctx); return err }}})
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}

// FuzzLockOptions: every kind of lock with any name, every Locker method, and
// TryLock and Lock with WithLeaseTime, WithWaitTime and WithLockReplicaAcks,
// each present or not, of any value; spin locks with any back-off. Invalid names, negative
// durations and counts, and invalid back-offs give ErrInvalidArgument before
// any round trip; valid ones reach Redis.
func FuzzLockOptions(f *testing.F) {
	sec := int64(time.Second)
	f.Add("orders:42", uint8(0), uint8(0), int64(0), int64(0), 0, int64(0), int64(0), int64(0), 0)
	f.Add("{t}:a", uint8(1), uint8(7), sec, sec, 1, sec, int64(0), int64(0), 0)
	f.Add("a}b", uint8(2), uint8(7), sec, sec, 1, sec, int64(0), int64(0), 0)
	f.Add("", uint8(5), uint8(0), int64(0), int64(0), 0, int64(0), int64(0), int64(0), 0)
	f.Add("x", uint8(7), uint8(1), int64(-1), int64(0), 0, int64(0), int64(0), int64(0), 0)
	f.Add("x", uint8(8), uint8(2), int64(0), int64(-1), 0, int64(0), int64(0), int64(0), 0)
	f.Add("x", uint8(6), uint8(4), int64(0), int64(0), -1, int64(0), int64(0), int64(0), 0)
	f.Add("x", uint8(6), uint8(4), int64(0), int64(0), 2, int64(-1), int64(0), int64(0), 0)
	f.Add("spin", uint8(3), uint8(0), int64(0), int64(0), 0, int64(0), int64(time.Millisecond), int64(128*time.Millisecond), 2)
	f.Add("spin", uint8(3), uint8(0), int64(0), int64(0), 0, int64(0), int64(time.Millisecond), int64(0), 2)
	f.Add("spin", uint8(3), uint8(0), int64(0), int64(0), 0, int64(0), int64(time.Millisecond), int64(time.Second), 0)
	f.Add("spin", uint8(4), uint8(0), int64(0), int64(0), 0, int64(0), int64(0), int64(0), 0)
	f.Add("spin", uint8(9), uint8(0), int64(0), int64(0), 0, int64(0), int64(time.Millisecond), int64(time.Second), 2)
	f.Add("spin", uint8(10), uint8(0), int64(0), int64(0), 0, int64(0), int64(0), int64(0), 0)
	f.Fuzz(func(t *testing.T, name string, kind, set uint8, lease, wait int64, replicas int, ackTimeout, initial, maxDelay int64, mult int) {
		rdb, h := offline(t)
		c, err := New(rdb)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()

		exp := ExponentialBackoff{Initial: time.Duration(initial), Max: time.Duration(maxDelay), Multiplier: mult}
		badBackoff := false
		var l Locker
		switch kind % 11 {
		case 0:
			l = c.NewMutex(name)
		case 1:
			l = c.NewNonReentrantMutex(name)
		case 2:
			l = c.NewFencedMutex(name)
		case 3:
			l = c.NewSpinMutex(name, exp)
			badBackoff = exp.Initial <= 0 || exp.Max < exp.Initial || exp.Multiplier < 1
		case 4:
			l = c.NewSpinMutex(name, ConstantBackoff(initial))
			badBackoff = initial <= 0
		case 5:
			l = c.NewFairMutex(name)
		case 6:
			l = c.NewNonReentrantFairMutex(name)
		case 7:
			l = c.NewRWMutex(name).ReadLock()
		case 8:
			l = c.NewRWMutex(name).WriteLock()
		case 9:
			l = c.NewSpinMutex(name, DefaultBackoff, DefaultBackoff)
			badBackoff = true
		case 10:
			l = c.NewSpinMutex(name, nil)
			badBackoff = true
		}
		badName := name == "" || lua.CheckName(name) != nil
		bad := badName || badBackoff

		var lockOpts []AcquireOption
		var tryOpts []TryOption
		badOpts, badTry := false, false
		if set&optLease != 0 {
			lockOpts = append(lockOpts, WithLeaseTime(time.Duration(lease)))
			badOpts = badOpts || lease < 0
		}
		if set&optAcks != 0 {
			lockOpts = append(lockOpts, WithLockReplicaAcks(replicas, time.Duration(ackTimeout)))
			badOpts = badOpts || replicas < 0 || ackTimeout < 0
		}
		for _, o := range lockOpts {
			tryOpts = append(tryOpts, o)
		}
		if set&optWait != 0 {
			tryOpts = append(tryOpts, WithWaitTime(time.Duration(wait)))
			badTry = wait < 0
		}
		calls := []fuzzCall{
			{what: "TryLock", invalid: bad || badOpts || badTry, run: func(ctx context.Context) error {
				_, err := l.TryLock(ctx, tryOpts...)
				return err
			}},
			{what: "Lock", invalid: bad || badOpts, run: func(ctx context.Context) error {
				_, err := l.Lock(ctx, lockOpts...)
				return err
			}},
			{what: "Unlock", invalid: bad, offline: true, run: func(ctx context.Context) error { return l.Unlock(ctx) }},
			{what: "IsLocked", invalid: bad, run: func(ctx context.Context) error { _, err := l.IsLocked(ctx); return err }},
			{what: "IsHeld", invalid: bad, run: func(ctx context.Context) error { _, err := l.IsHeld(ctx); return err }},
			{what: "HoldCount", invalid: bad, run: func(ctx context.Context) error { _, err := l.HoldCount(ctx); return err }},
			{what: "RemainTTL", invalid: bad, run: func(ctx context.Context) error { _, err := l.RemainTTL(ctx); return err }},
			{what: "ForceUnlock", invalid: bad, run: func(ctx context.Context) error { _, err := l.ForceUnlock(ctx); return err }},
		}
		if m, ok := l.(*FencedMutex); ok {
			calls = append(calls, fuzzCall{what: "Token", invalid: bad, run: func(ctx context.Context) error {
				_, err := m.Token(ctx)
				return err
			}})
		}
		for i := range calls {
			calls[i].what = fmt.Sprintf("%T(%.40q).%s", l, name, calls[i].what)
		}
		check(t, h, calls)
	})
}

// maxFuzzPermits is the most permits an ExpirableSemaphore acquisition
// takes: more is ErrInvalidArgument (its ids are made before any round trip).
const maxFuzzPermits = MaxPermitsPerCall

// FuzzSyncOptions: every method of Semaphore, ExpirableSemaphore and
// CountDownLatch with any name, any counts n, durations d and d2 (the wait,
// lease and time-to-live options, WithWaitTime and WithLeaseTime, each
// present or not) and permit ids. Invalid values give ErrInvalidArgument before
// any round trip; valid ones reach Redis.
func FuzzSyncOptions(f *testing.F) {
	id := "0123456789abcdef0123456789ABCDEF"
	sec := int64(time.Second)
	f.Add("sem", uint8(0), uint8(0), int64(1), sec, sec, id)
	f.Add("{t}:sem", uint8(1), uint8(3), int64(0), int64(-1), sec, id)
	f.Add("sem", uint8(1), uint8(3), int64(2), sec, int64(-1), id[:31])
	f.Add("latch", uint8(2), uint8(0), int64(0), int64(0), int64(0), id)
	f.Add("{t}:latch", uint8(2), uint8(0), int64(1), int64(0), int64(0), id)
	f.Add("a{b", uint8(0), uint8(0), int64(-1), int64(0), int64(0), "")
	f.Add("sem", uint8(1), uint8(1), int64(1), int64(NoExpiry), int64(0), strings.ToUpper(id))
	f.Add("sem", uint8(1), uint8(0), int64(math.MaxInt64), int64(0), int64(0), id)
	f.Fuzz(func(t *testing.T, name string, kind, set uint8, n, d, d2 int64, id string) {
		rdb, h := offline(t)
		c, err := New(rdb)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		dur, dur2 := time.Duration(d), time.Duration(d2)
		var calls []fuzzCall
		switch kind % 3 {
		case 0:
			s := c.NewSemaphore(name)
			bad := name == "" || lua.CheckSemaphoreName(name) != nil
			var tryOpts []TryOption
			badWait := false
			if set&optWait != 0 {
				tryOpts, badWait = append(tryOpts, WithWaitTime(dur)), dur < 0
			}
			calls = []fuzzCall{
				{what: "Acquire", invalid: bad || n < 1, run: func(ctx context.Context) error { return s.Acquire(ctx, n) }},
				{what: "TryAcquire", invalid: bad || n < 1 || badWait, run: func(ctx context.Context) error { return s.TryAcquire(ctx, n, tryOpts...) }},
				{what: "Release", invalid: bad || n < 1, run: func(ctx context.Context) error { return s.Release(ctx, n) }},
				{what: "ReleaseIfExists", invalid: bad || n < 1, run: func(ctx context.Context) error { _, err := s.ReleaseIfExists(ctx, n); return err }},
				{what: "TrySetPermits", invalid: bad || n < 0 || d < 0, run: func(ctx context.Context) error { _, err := s.TrySetPermits(ctx, n, dur); return err }},
				{what: "AddPermits", invalid: bad, run: func(ctx context.Context) error { return s.AddPermits(ctx, n) }},
				{what: "AvailablePermits", invalid: bad, run: func(ctx context.Context) error { _, err := s.AvailablePermits(ctx); return err }},
				{what: "DrainPermits", invalid: bad, run: func(ctx context.Context) error { _, err := s.DrainPermits(ctx); return err }},
				{what: "Delete", invalid: bad, run: func(ctx context.Context) error { _, err := s.Delete(ctx); return err }},
			}
		case 1:
			s := c.NewExpirableSemaphore(name)
			bad := name == "" || lua.CheckExpirableSemaphoreName(name) != nil
			badID := !isPermitID(id)
			var opts []AcquireOption
			var tryOpts []TryOption
			badLease, badWait := false, false
			if set&optLease != 0 {
				opts, badLease = append(opts, WithLeaseTime(dur)), dur < 0
				tryOpts = append(tryOpts, opts[0])
			}
			if set&optWait != 0 {
				tryOpts, badWait = append(tryOpts, WithWaitTime(dur2)), dur2 < 0
			}
			tooMany := n > maxFuzzPermits
			badAcquire, badTry := bad || n < 1 || tooMany || badLease, bad || n < 1 || tooMany || badLease || badWait
			calls = []fuzzCall{
				{what: "Acquire", invalid: badAcquire, run: func(ctx context.Context) error {
					_, err := s.Acquire(ctx, n, opts...)
					return err
				}},
				{what: "TryAcquire", invalid: badTry, run: func(ctx context.Context) error {
					_, err := s.TryAcquire(ctx, n, tryOpts...)
					return err
				}},
				{what: "Release(id)", invalid: bad || badID, run: func(ctx context.Context) error { return s.Release(ctx, id) }},
				{what: "Release(id, id)", invalid: true, run: func(ctx context.Context) error { return s.Release(ctx, id, id) }},
				{what: "Release()", invalid: true, run: func(ctx context.Context) error { return s.Release(ctx) }},
				{what: "UpdateLease", invalid: bad || badID || dur <= 0 && dur != NoExpiry, run: func(ctx context.Context) error {
					_, err := s.UpdateLease(ctx, id, dur)
					return err
				}},
				{what: "LeaseTime", invalid: bad || badID, run: func(ctx context.Context) error { _, err := s.LeaseTime(ctx, id); return err }},
				{what: "SetPermits", invalid: bad || n < 0, run: func(ctx context.Context) error { return s.SetPermits(ctx, n) }},
				{what: "TrySetPermits", invalid: bad || n < 0, run: func(ctx context.Context) error { _, err := s.TrySetPermits(ctx, n); return err }},
				{what: "AddPermits", invalid: bad, run: func(ctx context.Context) error { return s.AddPermits(ctx, n) }},
				{what: "AvailablePermits", invalid: bad, run: func(ctx context.Context) error { _, err := s.AvailablePermits(ctx); return err }},
				{what: "AcquiredPermits", invalid: bad, run: func(ctx context.Context) error { _, err := s.AcquiredPermits(ctx); return err }},
				{what: "TotalPermits", invalid: bad, run: func(ctx context.Context) error { _, err := s.TotalPermits(ctx); return err }},
				{what: "Delete", invalid: bad, run: func(ctx context.Context) error { _, err := s.Delete(ctx); return err }},
			}
		case 2:
			l := c.NewCountDownLatch(name)
			bad := name == "" || lua.CheckLatchName(name) != nil
			calls = []fuzzCall{
				{what: "TrySetCount", invalid: bad || n < 1, run: func(ctx context.Context) error { _, err := l.TrySetCount(ctx, n); return err }},
				{what: "CountDown", invalid: bad, run: func(ctx context.Context) error { return l.CountDown(ctx) }},
				{what: "Count", invalid: bad, run: func(ctx context.Context) error { _, err := l.Count(ctx); return err }},
				{what: "Await", invalid: bad, run: func(ctx context.Context) error { return l.Await(ctx) }},
				{what: "Delete", invalid: bad, run: func(ctx context.Context) error { _, err := l.Delete(ctx); return err }},
			}
		}
		for i := range calls {
			calls[i].what = fmt.Sprintf("%.40q: %s(n=%d, d=%v, d2=%v, id=%.40q, options %03b)", name, calls[i].what, n, dur, dur2, id, set)
		}
		check(t, h, calls)
	})
}

// isPermitID reports whether id is a permit id as users give it: 32 hex
// digits, either case.
func isPermitID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// FuzzBackoff: a back-off that NewSpinMutex accepts pauses as documented:
// ExponentialBackoff Initial, then Multiplier times longer, plus at most n ms
// of jitter, never longer than Max, so within [min(Initial, Max), Max];
// ConstantBackoff its duration. n is the attempt count, bounded here by what a
// spin lock can reach (a pause at least every attempt).
func FuzzBackoff(f *testing.F) {
	f.Add(int64(time.Millisecond), int64(128*time.Millisecond), 2, 0)
	f.Add(int64(time.Millisecond), int64(128*time.Millisecond), 2, 20)
	f.Add(int64(1), int64(1), 1, 4096)
	f.Add(int64(time.Millisecond), int64(time.Hour), 10_000_000_000_000, 1)
	f.Add(int64(1), int64(math.MaxInt64), 2, 64)
	f.Fuzz(func(t *testing.T, initial, maxDelay int64, mult, n int) {
		n = int(uint(n) % 1e5)
		if cb := ConstantBackoff(initial); checkBackoff(cb) == nil {
			if got := cb.Delay(n); got != time.Duration(initial) {
				t.Errorf("%T(%v).Delay(%d) = %v", cb, time.Duration(initial), n, got)
			}
		}
		b := ExponentialBackoff{Initial: time.Duration(initial), Max: time.Duration(maxDelay), Multiplier: mult}
		if checkBackoff(b) != nil {
			return
		}
		got := b.Delay(n)
		if got >= b.Initial && got <= b.Max {
			return
		}
		t.Errorf("%+v.Delay(%d) = %v, want within [%v, %v]", b, n, got, b.Initial, b.Max)
	})
}
