package integration

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/redis/go-redis/v9"
)

// The steps of FuzzLockSequence, one per pair of fuzz bytes: the step, then
// a byte whose two low bits pick the owner (3 is owner 0) and whose other bits
// are the step's argument (bit 4 also picks the other owner).
const (
	stepAcquire        = iota // Acquire with the owner's count: take or re-enter the lock
	stepAcquireTwice          // the same Acquire sent twice, as go-redis retries after a lost reply
	stepAcquireBehind         // Acquire with a count one below Redis' (an earlier call's reply lost)
	stepAcquireAhead          // Acquire with a count above Redis' (holds lost): a resync
	stepRelease               // Release of every hold of the owner
	stepReleaseTwice          // the same full Release sent twice (one unlock latch)
	stepReleasePartial        // Release of some of the owner's holds
	stepPartialTwice          // the same partial Release sent twice
	stepReleaseAhead          // a partial Release with a count above Redis'
	stepHandOff               // Release of every hold, handing the lock to another owner
	stepForce                 // ForceRelease, whoever holds the lock
	stepExpire                // PEXPIRE 1 ms, then wait until the key is gone
	stepInspect               // Inspect for the owner
	steps
)

// maxSteps bounds the steps of one input.
const maxSteps = 48

// fuzzLease is the lease the steps give the lock.
const fuzzLease = time.Minute

// FuzzLockSequence runs sequences of steps by three owners on one lock
// (lua.Acquire, lua.Release with its partial, retried and hand-off forms,
// lua.ForceRelease, expiry and lua.Inspect) through the real scripts against
// a real redis-server, and checks each reply against a model of the lock's
// hash (owner field -> hold count) built from the scripts' contracts
// (lua/acquire.lua, release.lua, release_partial.lua, force_release.lua,
// inspect.lua). After every step the hash (HGETALL) must equal the model, hold
// at most one owner, and carry a time to live within the lease.
func FuzzLockSequence(f *testing.F) {
	f.Add([]byte{stepAcquire, 0, stepAcquire, 0, stepRelease, 0})
	f.Add([]byte{stepAcquire, 0, stepAcquire, 1, stepRelease, 1, stepRelease, 0, stepAcquire, 1})
	f.Add([]byte{stepAcquire, 0, stepAcquire, 0, stepAcquire, 0, stepReleasePartial, 0, stepPartialTwice, 0, stepInspect, 0, stepRelease, 0})
	f.Add([]byte{stepAcquireTwice, 2, stepAcquireBehind, 2, stepAcquireAhead, 2, stepAcquireAhead, 1, stepReleaseAhead, 2, stepReleaseTwice, 2, stepReleaseTwice, 2})
	f.Add([]byte{stepAcquire, 0, stepHandOff, 0x10, stepInspect, 1, stepHandOff, 0x12, stepAcquire, 0, stepForce, 0, stepForce, 0})
	f.Add([]byte{stepAcquire, 1, stepAcquire, 1, stepExpire, 0, stepAcquireAhead, 1, stepAcquire, 1, stepExpire, 1, stepExpire, 1, stepInspect, 1})
	f.Add([]byte{stepRelease, 0, stepReleasePartial, 0, stepReleaseAhead, 0, stepInspect, 0, stepHandOff, 0, stepAcquireBehind, 0})
	rdb := redistest.Shared(f).Client(f)
	client := uuid.NewString()
	owners := [3]string{client + ":1", client + ":2", client + ":3"}
	f.Fuzz(func(t *testing.T, ops []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s := &lockRun{t: t, ctx: ctx, rdb: rdb, lk: lua.NewLock(redistest.Name(t)), model: map[string]int64{}}
		t.Cleanup(func() { rdb.Del(context.Background(), s.lk.Name()) })
		for i := 0; i+1 < len(ops) && i < 2*maxSteps; i += 2 {
			step, o, arg := ops[i]%steps, int(ops[i+1]&3%3), ops[i+1]>>2
			s.history = append(s.history, fmt.Sprintf("%d(owner %d, %d)", step, o, arg))
			s.step(step, owners[o], owners[(o+1+int(arg>>2&1))%3], int64(arg))
			s.compare()
		}
	})
}

// lockRun is one sequence of FuzzLockSequence: the lock, the model of its
// hash, and the steps so far, for failure messages.
type lockRun struct {
	t       *testing.T
	ctx     context.Context
	rdb     *redis.Client
	lk      *lua.Lock
	model   map[string]int64
	history []string
}

// fail stops the run, saying where in the sequence.
func (s *lockRun) fail(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("after steps %s (model %v): %s", strings.Join(s.history, " "), s.model, fmt.Sprintf(format, args...))
}

func (s *lockRun) acquire(owner string, expected int64) lua.AcquireReply {
	s.t.Helper()
	r, err := lua.Acquire(s.ctx, s.rdb, lua.AcquireArgs{Lock: s.lk, Field: lua.NewText(owner), Lease: lua.NewMillis(fuzzLease), Expected: expected})
	if err != nil {
		s.fail("Acquire(%s, expected %d): %v", owner, expected, err)
	}
	return r
}

func (s *lockRun) release(a lua.ReleaseArgs) lua.ReleaseReply {
	s.t.Helper()
	a.Lock, a.Lease, a.LatchTTL, a.Publish = s.lk, lua.NewMillis(fuzzLease), lua.NewMillis(10*time.Second), lua.Publish
	r, err := lua.Release(s.ctx, s.rdb, a)
	if err != nil {
		s.fail("Release(%s, expected %d, levels %d): %v", a.Field, a.Expected, a.Levels, err)
	}
	return r
}

// wantAcquired checks the reply of an acquisition the model says succeeds.
func (s *lockRun) wantAcquired(r lua.AcquireReply, what string) {
	s.t.Helper()
	if r != (lua.AcquireReply{Acquired: true}) {
		s.fail("%s: got %+v, want acquired", what, r)
	}
}

// wantRefused checks the reply of an acquisition refused because another
// owner holds the lock: the holder's remaining lease.
func (s *lockRun) wantRefused(r lua.AcquireReply, what string) {
	s.t.Helper()
	if r.Acquired || r.Resync || r.TTL <= 0 || r.TTL > fuzzLease {
		s.fail("%s: got %+v, want refused with the holder's TTL", what, r)
	}
}

// step runs one step for owner (other: another owner, the successor of a
// hand-off) and checks its reply against the model, which it updates.
func (s *lockRun) step(step byte, owner, other string, arg int64) {
	s.t.Helper()
	n := s.model[owner]
	free := len(s.model) == 0
	mine := free || n > 0
	switch step {
	case stepAcquire, stepAcquireTwice:
		for i := range 1 + int(step-stepAcquire) {
			r, what := s.acquire(owner, n), fmt.Sprintf("acquire #%d with count %d", i+1, n)
			if mine {
				s.wantAcquired(r, what)
			} else {
				s.wantRefused(r, what)
			}
		}
		if mine {
			s.model[owner] = n + 1
		}
	case stepAcquireBehind:
		if n == 0 {
			return
		}
		s.wantAcquired(s.acquire(owner, n-1), fmt.Sprintf("acquire with count %d, one behind", n-1))
	case stepAcquireAhead:
		c := n + 1 + arg%3
		if r := s.acquire(owner, c); r != (lua.AcquireReply{Resync: true, Count: n}) {
			s.fail("acquire with count %d, ahead: got %+v, want a resync to %d", c, r, n)
		}
	case stepRelease, stepReleaseTwice:
		a := lua.ReleaseArgs{Field: lua.NewText(owner), Latch: s.lk.NewLatch(), Expected: n, Levels: n}
		want := lua.ReleaseReply{Outcome: lua.NotHeld}
		if n > 0 {
			want.Outcome = lua.Released
		}
		for i := range 1 + int(step-stepRelease) {
			if r := s.release(a); r != want {
				s.fail("release #%d of %d holds: got %+v, want %+v", i+1, n, r, want)
			}
		}
		delete(s.model, owner)
	case stepReleasePartial, stepPartialTwice:
		if n < 2 {
			s.step(stepRelease, owner, other, arg)
			return
		}
		k := 1 + arg%(n-1)
		a := lua.ReleaseArgs{Field: lua.NewText(owner), Latch: s.lk.NewLatch(), Expected: n, Levels: k}
		for i := range 1 + int(step-stepReleasePartial) {
			if r := s.release(a); r != (lua.ReleaseReply{Outcome: lua.Partial}) {
				s.fail("release #%d of %d of %d holds: got %+v, want partial", i+1, k, n, r)
			}
		}
		s.model[owner] = n - k
	case stepReleaseAhead:
		c := n + 2 + arg%3
		want := lua.ReleaseReply{Outcome: lua.Resync, Count: n}
		if n == 0 {
			want = lua.ReleaseReply{Outcome: lua.NotHeld}
		}
		if r := s.release(lua.ReleaseArgs{Field: lua.NewText(owner), Latch: s.lk.NewLatch(), Expected: c, Levels: 1}); r != want {
			s.fail("release of 1 of %d holds, ahead: got %+v, want %+v", c, r, want)
		}
	case stepHandOff:
		a := lua.ReleaseArgs{Field: lua.NewText(owner), Latch: s.lk.NewLatch(), Expected: n, Levels: n,
			Successor: lua.NewText(other), SuccessorLease: lua.NewMillis(fuzzLease), Streak: int(arg % 5)}
		want := lua.ReleaseReply{Outcome: lua.NotHeld}
		if n > 0 {
			want.Outcome = lua.HandedOff
			s.model = map[string]int64{other: 1}
		}
		if r := s.release(a); r != want {
			s.fail("hand-off of %d holds to %q: got %+v, want %+v", n, other, r, want)
		}
	case stepForce:
		ok, err := lua.ForceRelease(s.ctx, s.rdb, s.lk, lua.Publish)
		if err != nil || ok == free {
			s.fail("force release: got (%v, %v), want %v", ok, err, !free)
		}
		clear(s.model)
	case stepExpire:
		if free {
			return
		}
		if err := s.rdb.PExpire(s.ctx, s.lk.Name(), time.Millisecond).Err(); err != nil {
			s.fail("PEXPIRE: %v", err)
		}
		for {
			n, err := s.rdb.Exists(s.ctx, s.lk.Name()).Result()
			if err != nil {
				s.fail("waiting for the key to expire: %v", err)
			}
			if n == 0 {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
		clear(s.model)
	case stepInspect:
		in, err := lua.Inspect(s.ctx, s.rdb, s.lk, owner)
		switch {
		case err != nil:
			s.fail("inspect: %v", err)
		case in.Locked == free || in.Count != n || free && in.TTL != 0 || !free && (in.TTL <= 0 || in.TTL > fuzzLease):
			s.fail("inspect for %s: got %+v, want locked %v, count %d", owner, in, !free, n)
		}
	}
}

// compare checks the lock's hash against the model: the same owners and
// counts, at most one owner, and a time to live within the lease.
func (s *lockRun) compare() {
	s.t.Helper()
	h, err := s.rdb.HGetAll(s.ctx, s.lk.Name()).Result()
	if err != nil {
		s.fail("HGETALL: %v", err)
	}
	want := make(map[string]string, len(s.model))
	for o, n := range s.model {
		want[o] = strconv.FormatInt(n, 10)
	}
	if !maps.Equal(h, want) {
		s.fail("hash %v, model %v", h, want)
	}
	if len(h) > 1 {
		s.fail("hash %v has more than one owner", h)
	}
	ttl, err := s.rdb.PTTL(s.ctx, s.lk.Name()).Result()
	switch {
	case err != nil:
		s.fail("PTTL: %v", err)
	case len(h) == 0 && ttl != -2:
		s.fail("no hash, yet PTTL %v", ttl)
	case len(h) > 0 && (ttl <= 0 || ttl > fuzzLease):
		s.fail("PTTL %v, want within the lease %v", ttl, fuzzLease)
	}
}
