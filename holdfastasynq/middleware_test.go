package holdfastasynq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/stretchr/testify/require"
)

type span struct {
	key        string
	start, end time.Time
}

// work stands for a handler's work: d, or until ctx ends.
func work(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// peakHandler counts the handlers running in cur and their most at once in
// peak; each works d, then, if its work was not cut short, sends on done.
func peakHandler(cur, peak *atomic.Int64, d time.Duration, done chan<- struct{}) asynq.HandlerFunc {
	return func(ctx context.Context, _ *asynq.Task) error {
		n := cur.Add(1)
		for {
			m := peak.Load()
			if n <= m || peak.CompareAndSwap(m, n) {
				break
			}
		}
		err := work(ctx, d)
		cur.Add(-1)
		if err == nil {
			done <- struct{}{}
		}
		return err
	}
}

// Two asynq servers (two processes: their own go-redis and rlock clients),
// four workers each, process 2 keys x 12 tasks: the tasks of one key never
// overlap, across both servers.
func TestSerializeNoOverlapAcrossServers(t *testing.T) {
	srv := redistest.Shared(t)
	q := queueName(t)
	prefix := redistest.Name(t) + ":"
	ctx := testCtx(t, 40*time.Second)
	const keys, perKey = 2, 12

	var mu sync.Mutex
	var spans []span
	servedBy := map[string]int{}
	done := make(chan struct{}, keys*perKey*2)
	for _, who := range []string{"a", "b"} {
		p := newProc(t, srv)
		mux := asynq.NewServeMux()
		mux.Use(Serialize(p.c, func(t *asynq.Task) string { return string(t.Payload()) }, WithPrefix(prefix)))
		mux.HandleFunc("job", func(ctx context.Context, task *asynq.Task) error {
			s := span{key: string(task.Payload()), start: time.Now()}
			if err := work(ctx, 15*time.Millisecond); err != nil {
				return err
			}
			s.end = time.Now()
			mu.Lock()
			spans = append(spans, s)
			servedBy[who]++
			mu.Unlock()
			done <- struct{}{}
			return nil
		})
		startServer(t, p, q, 4, mux)
	}

	client := asynq.NewClientFromRedisClient(srv.Client(t))
	for i := range perKey {
		for k := range keys {
			_, err := client.EnqueueContext(ctx, asynq.NewTask("job", fmt.Appendf(nil, "key-%d", k)), asynq.Queue(q), asynq.MaxRetry(50))
			require.NoError(t, err, "task %d", i)
		}
	}
	for range keys * perKey {
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatalf("tasks not done: %v", ctx.Err())
		}
	}

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, spans, keys*perKey)
	for k := range keys {
		key := fmt.Sprintf("key-%d", k)
		var ks []span
		for _, s := range spans {
			if s.key == key {
				ks = append(ks, s)
			}
		}
		require.Len(t, ks, perKey)
		slices.SortFunc(ks, func(x, y span) int { return x.start.Compare(y.start) })
		for i := 1; i < len(ks); i++ {
			require.False(t, ks[i].start.Before(ks[i-1].end), "%s: task started at %v before the one before ended at %v", key, ks[i].start, ks[i-1].end)
		}
	}
	t.Logf("tasks run by server: %v", servedBy)
}

// Two servers, four workers each, 16 tasks of a type limited to 2: never
// more than 2 run at once; tasks of another type are not bounded.
func TestLimitBoundsAcrossServers(t *testing.T) {
	srv := redistest.Shared(t)
	q := queueName(t)
	prefix := redistest.Name(t) + ":"
	ctx := testCtx(t, 40*time.Second)
	const limit, tasks = 2, 16

	var cur, peak atomic.Int64
	var free, freePeak atomic.Int64
	done := make(chan struct{}, 2*tasks)
	for range 2 {
		p := newProc(t, srv)
		mux := asynq.NewServeMux()
		mux.Use(Limit(p.c, map[string]int64{"limited": limit}, WithPrefix(prefix)))
		mux.HandleFunc("limited", peakHandler(&cur, &peak, 20*time.Millisecond, done))
		mux.HandleFunc("free", peakHandler(&free, &freePeak, 100*time.Millisecond, done))
		startServer(t, p, q, 4, mux)
	}

	client := asynq.NewClientFromRedisClient(srv.Client(t))
	for range tasks {
		_, err := client.EnqueueContext(ctx, asynq.NewTask("limited", nil), asynq.Queue(q), asynq.MaxRetry(50))
		require.NoError(t, err)
	}
	for range 6 {
		_, err := client.EnqueueContext(ctx, asynq.NewTask("free", nil), asynq.Queue(q))
		require.NoError(t, err)
	}
	for range tasks + 6 {
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatalf("tasks not done: %v", ctx.Err())
		}
	}
	t.Logf("peak concurrency: limited %d (limit %d), free %d", peak.Load(), limit, freePeak.Load())
	require.LessOrEqual(t, peak.Load(), int64(limit))
	require.Equal(t, int64(limit), peak.Load(), "the limit was never reached")
}

// A worker that dies holding the only permit (its connections cut:
// no renewal, no release) gives it back within the watchdog timeout: a task
// waiting for it then runs.
func TestLimitDeadWorkerPermitReturns(t *testing.T) {
	srv := redistest.Shared(t)
	prefix := redistest.Name(t) + ":"
	ctx := testCtx(t, 20*time.Second)
	dead, live := newProc(t, srv), newProc(t, srv)

	s := dead.c.NewExpirableSemaphore(prefix + "limited")
	_, err := s.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	held, err := s.TryAcquire(ctx, 1)
	require.NoError(t, err)
	dead.cut()
	died := time.Now()

	ran := false
	h := Limit(live.c, map[string]int64{"limited": 1}, WithPrefix(prefix), WithWait(10*time.Second))(
		asynq.HandlerFunc(func(context.Context, *asynq.Task) error { ran = true; return nil }))
	require.NoError(t, h.ProcessTask(ctx, asynq.NewTask("limited", nil)))
	took := time.Since(died)
	t.Logf("the dead worker's permit came back after %v (watchdog timeout %v)", took, testWatchdog)
	require.True(t, ran)
	require.Less(t, took, testWatchdog+1500*time.Millisecond)
	<-held.Done()
	require.ErrorIs(t, held.Err(), rlock.ErrPermitLost)
}

// A lock lost while the handler runs (its key deleted) cancels the handler's
// ctx with the Lease's Err as the cause, and fails the task with it.
func TestSerializeLossCancelsHandler(t *testing.T) {
	srv := redistest.Shared(t)
	prefix := redistest.Name(t) + ":"
	ctx := testCtx(t, 20*time.Second)
	p := newProc(t, srv)

	started := make(chan struct{})
	var cause error
	h := Serialize(p.c, func(*asynq.Task) string { return "k" }, WithPrefix(prefix))(
		asynq.HandlerFunc(func(ctx context.Context, _ *asynq.Task) error {
			close(started)
			<-ctx.Done()
			cause = context.Cause(ctx)
			return ctx.Err()
		}))
	errc := make(chan error, 1)
	go func() { errc <- h.ProcessTask(ctx, asynq.NewTask("job", nil)) }()
	<-started
	require.NoError(t, p.rdb.Del(ctx, prefix+"k").Err())
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		t.Fatal("the handler's ctx was not cancelled")
	}
	require.ErrorIs(t, cause, rlock.ErrLockLost)
	require.ErrorIs(t, err, rlock.ErrLockLost)
	require.ErrorIs(t, err, context.Canceled)
	require.True(t, IsFailure(err))
}

// A lock held elsewhere past the wait fails the task with ErrBusy (and
// rlock.ErrNotAcquired) without running the handler; asynq's IsFailure then
// says it is not a failure. A task without a key runs without a lock.
func TestSerializeBusy(t *testing.T) {
	srv := redistest.Shared(t)
	prefix := redistest.Name(t) + ":"
	ctx := testCtx(t, 20*time.Second)
	other, p := newProc(t, srv), newProc(t, srv)
	lease, err := other.c.NewMutex(prefix + "k").Lock(ctx)
	require.NoError(t, err)
	defer func() { _ = lease.Unlock(ctx) }()

	ran := 0
	h := Serialize(p.c, func(t *asynq.Task) string { return string(t.Payload()) }, WithPrefix(prefix), WithWait(100*time.Millisecond))(
		asynq.HandlerFunc(func(context.Context, *asynq.Task) error { ran++; return nil }))
	start := time.Now()
	err = h.ProcessTask(ctx, asynq.NewTask("job", []byte("k")))
	require.ErrorIs(t, err, ErrBusy)
	require.ErrorIs(t, err, rlock.ErrNotAcquired)
	require.False(t, IsFailure(err))
	require.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
	require.Zero(t, ran)

	require.NoError(t, h.ProcessTask(ctx, asynq.NewTask("job", nil)))
	require.Equal(t, 1, ran)
}

func TestBusyRetryDelay(t *testing.T) {
	f := BusyRetryDelay(time.Second, func(int, error, *asynq.Task) time.Duration { return time.Hour })
	busy := fmt.Errorf("%w: %w", ErrBusy, rlock.ErrNotAcquired)
	for range 100 {
		d := f(3, busy, nil)
		require.GreaterOrEqual(t, d, time.Second)
		require.LessOrEqual(t, d, 2*time.Second)
	}
	require.Equal(t, time.Hour, f(3, errors.New("boom"), nil))
	require.True(t, IsFailure(errors.New("boom")))
	require.False(t, IsFailure(nil))
	require.False(t, IsFailure(busy))
}
