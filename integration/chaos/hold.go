package chaos

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// holdOnce acquires kind on name (bounded), runs a critical section and
// releases, recording each step.
func (w *worker) holdOnce(g int, kind, name string) {
	b := w.bound()
	ctx, cancel := context.WithTimeout(context.Background(), b)
	op := Op{G: g, Kind: kind, Name: name, Op: OpAcquire, Call: Mono(), Bound: int64(b),
		Hold: w.rec.NewHold(), Lease: int64(w.cfg.FixedLease)}
	key := w.rec.Begin(op)
	h, err := acquire(ctx, w.c, kind, name, w.cfg.FixedLease)
	cancel()
	op.Ret, op.OK = Mono(), err == nil
	if err != nil {
		op.Err = err.Error()
	} else {
		op.Token = h.token()
	}
	w.rec.End(key, op)
	if err != nil {
		return
	}
	stop := w.plantRenewer(h, name)
	cs := w.section(g, h, op)
	stop()
	if w.release(g, h, op) && !cs.Lost {
		// The release says the hold had ended: the holder learns it now, and
		// its last write may have raced that.
		now := Mono()
		w.rec.Record(Op{G: g, Kind: kind, Name: name, Op: OpLost, Hold: op.Hold, Call: now, Ret: now})
		cs.Lost = true
	}
	w.rec.Record(cs)
}

// trusting reports whether the worker is a double that never asks its lease.
func (w *worker) trusting() bool {
	return w.cfg.Planted == PlantPastDeadline || w.cfg.Planted == PlantRenewAfterLoss
}

// section is the critical section of the hold acquired by acq: 1-3 writes
// to the resource, each after a pause of up to Work/3 and a check of the
// lease (Err), as a careful client does; with Hold, a write every 50 ms
// until Hold has passed or the worker stops. Learning of a loss ends it.
func (w *worker) section(g int, h holding, acq Op) Op {
	cs := Op{G: g, Kind: acq.Kind, Name: acq.Name, Op: OpSection, Call: acq.Ret, Hold: acq.Hold, Token: acq.Token}
	writes, pause, end := 1+rand.IntN(3), w.cfg.Work/3, int64(math.MaxInt64)
	switch {
	case w.cfg.Hold > 0:
		writes, pause, end = math.MaxInt, 50*time.Millisecond, min(Mono()+int64(w.cfg.Hold), w.until.Load())
	case w.cfg.Planted != "":
		writes = 3 // a double's sections are long, to be caught in few faults
	}
	for i := 0; i < writes && Mono() < end && (w.cfg.Hold == 0 || Mono() < w.until.Load()); i++ {
		if !w.write(g, h, acq, &cs, w.pause(h, pause)) {
			break
		}
	}
	cs.Ret = max(cs.Ret, cs.Call)
	return cs
}

// write is one step of a section: unless the hold was lost (lost: its Done
// closed meanwhile) or its lease says so, one write to the resource. It
// returns whether the section goes on.
func (w *worker) write(g int, h holding, acq Op, cs *Op, lost bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	checked := Mono()
	if lost || (!w.trusting() && h.Err() != nil) {
		w.rec.Record(Op{G: g, Kind: acq.Kind, Name: acq.Name, Op: OpLost, Hold: acq.Hold, Call: Mono(), Ret: Mono()})
		cs.Lost = true
		return false
	}
	if !w.trusting() {
		cs.Valid = checked
	}
	cs.LastWrite = Mono()
	if acq.Kind == KindFenced || acq.Kind == KindElection {
		refused, err := w.res.fenced(ctx, acq.Name, acq.Token)
		if refused {
			cs.Stale++
		}
		if err != nil || (refused && !w.trusting()) {
			return false
		}
	}
	if exclusive(acq.Kind) && w.res.increment(ctx, acq.Name) {
		cs.Writes++
	}
	cs.Ret = Mono() // the section ends with its last write: a freeze after it overlaps nothing
	return true
}

// pause waits up to most (the work between two writes; a timed pause by
// design); it returns true when the hold's Done closed meanwhile, unless the
// worker is a double that does not listen.
func (w *worker) pause(h holding, most time.Duration) bool {
	done := h.Done()
	if w.trusting() {
		done = nil
	}
	wait := most
	if w.cfg.Hold == 0 {
		wait = time.Duration(rand.Int64N(int64(most) + 1))
	}
	select {
	case <-done:
		return true
	case <-time.After(wait):
		return false
	}
}

// release gives h back and records how that went; it returns whether the
// release said the hold had been lost. The del-release double deletes the
// lock's key first; the doubles believe every release.
func (w *worker) release(g int, h holding, acq Op) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	op := Op{G: g, Kind: acq.Kind, Name: acq.Name, Op: OpRelease, Hold: acq.Hold, Call: Mono()}
	var err error
	if w.cfg.Planted == PlantDelRelease && h.field() != "" {
		err = w.rdb.Del(ctx, acq.Name).Err()
		_ = h.release(ctx) // ends the lease locally; the hash is gone already
	} else {
		err = h.release(ctx)
	}
	op.Ret, op.OK = Mono(), err == nil
	if err != nil {
		op.Err, op.Lost = err.Error(), lostErr(err)
	}
	if w.cfg.Planted != "" {
		op.OK, op.Lost = true, false
	}
	w.rec.Record(op)
	return op.Lost
}

// renewAnyway is the renew-after-loss double's renewal: it puts its field
// back and extends the key whether or not it still held the lock.
var renewAnyway = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then redis.call('HSET', KEYS[1], ARGV[1], 1) end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`)

// plantRenewer starts the renew-after-loss double's own renewal of h (every
// third of the fixed lease) and returns the function that stops it.
func (w *worker) plantRenewer(h holding, name string) func() {
	if w.cfg.Planted != PlantRenewAfterLoss || h.field() == "" {
		return func() {}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(w.cfg.FixedLease / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				_ = renewAnyway.Run(context.Background(), w.rdb, []string{name}, h.field(), w.cfg.FixedLease.Milliseconds()).Err()
			}
		}
	})
	return func() { close(stop); wg.Wait() }
}

// baseline is the number of goroutines before the worker's clients exist.
func baseline() int { return runtime.NumGoroutine() }

// leaked waits up to d for the goroutines to be back at before, and returns
// how many more there still are.
func leaked(before int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		<-time.After(20 * time.Millisecond) // polling a condition with a deadline
	}
	return max(runtime.NumGoroutine()-before, 0)
}
