package integration

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/stretchr/testify/require"
)

// logRecord is one line of the client's log, its attributes by key.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]slog.Value
	text  string // the line as a text handler writes it
}

// recordHandler is a slog.Handler that passes every record on, in order.
type recordHandler struct {
	mu   sync.Mutex
	all  []logRecord
	next chan logRecord
}

func newRecordHandler() *recordHandler { return &recordHandler{next: make(chan logRecord, 1000)} }

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]slog.Value{}}
	var b strings.Builder
	_ = slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}).Handle(context.Background(), r)
	rec.text = strings.TrimSpace(b.String())
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.Resolve()
		return true
	})
	h.mu.Lock()
	h.all = append(h.all, rec)
	h.mu.Unlock()
	h.next <- rec
	return nil
}

func (h *recordHandler) lines() []logRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]logRecord(nil), h.all...)
}

// await returns the first record to come that match accepts, within d.
func (h *recordHandler) await(t *testing.T, d time.Duration, what string, match func(logRecord) bool) logRecord {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case r := <-h.next:
			t.Logf("log: %s", r.text)
			if match(r) {
				return r
			}
		case <-timeout:
			t.Fatalf("no %s logged within %v", what, d)
		}
	}
}

// healthObserver is an observer that hears the renewals' health and the holds' ends.
type healthObserver struct {
	renewed   chan struct{}
	failing   chan observe.RenewFailure
	recovered chan observe.RenewRecovery
	ends      chan observe.Hold
}

func newHealthObserver() *healthObserver {
	return &healthObserver{renewed: make(chan struct{}, 1000), failing: make(chan observe.RenewFailure, 1000),
		recovered: make(chan observe.RenewRecovery, 1000), ends: make(chan observe.Hold, 1000)}
}

func (o *healthObserver) Start(ctx context.Context, _ observe.Call) context.Context { return ctx }
func (o *healthObserver) End(context.Context, observe.Call, observe.Result)         {}
func (o *healthObserver) HoldStart(observe.Hold)                                    {}
func (o *healthObserver) HoldEnd(h observe.Hold, _ observe.HoldOutcome, _ error)    { o.ends <- h }
func (o *healthObserver) RenewFailing(f observe.RenewFailure)                       { o.failing <- f }
func (o *healthObserver) RenewRecovered(r observe.RenewRecovery)                    { o.recovered <- r }
func (o *healthObserver) Renewed(outcome observe.RenewOutcome, _ int) {
	if outcome == observe.RenewOK {
		o.renewed <- struct{}{}
	}
}

func recvWithin[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("no %s within %v", what, d)
		panic("unreachable")
	}
}

// TestOutageIsLogged: a holder whose Redis server is killed is told so in its
// log (WithLogger): a warning naming the lock, its kind and the lease it has
// left, at the first failed renewal round (within a renewal interval, 1 s
// here, and the round's timeout), then, when the lease runs out, one loss
// line naming the lock and its cause (deadline), with the last renewal's
// error. The observer hears the same. Nothing is logged while Redis answers.
func TestOutageIsLogged(t *testing.T) {
	const lease = 3 * time.Second
	srv := redistest.StartControllable(t)
	logs := newRecordHandler()
	obs := newHealthObserver()
	c := newClient(t, srv.Client(t), rlock.WithWatchdogTimeout(lease), rlock.WithObserver(obs),
		rlock.WithLogger(slog.New(logs)))
	name := redistest.Name(t)
	ctx := testCtx(t, time.Minute)
	l, err := c.NewMutex(name).Lock(ctx)
	require.NoError(t, err)
	recvWithin(t, obs.renewed, 10*time.Second, "renewal")
	recvWithin(t, obs.renewed, 10*time.Second, "second renewal")
	require.Empty(t, logs.lines(), "logged while Redis answers")

	srv.Kill()
	killed := time.Now()
	warn := logs.await(t, lease+10*time.Second, "failed renewal", func(r logRecord) bool {
		return r.msg == observe.EventRenewal && r.level == slog.LevelWarn
	})
	t.Logf("warned %v after the kill", time.Since(killed).Round(time.Millisecond))
	require.Equal(t, name, warn.attrs[observe.AttrName].String())
	require.Equal(t, observe.KindMutex.String(), warn.attrs[observe.AttrKind].String())
	require.Equal(t, observe.RenewFailed.String(), warn.attrs[observe.AttrOutcome].String())
	left := warn.attrs[observe.AttrLeaseLeft]
	require.Equal(t, slog.KindDuration, left.Kind())
	require.Greater(t, left.Duration(), time.Duration(0))
	require.LessOrEqual(t, left.Duration(), lease)
	require.NotEmpty(t, warn.attrs["error"].String())

	f := recvWithin(t, obs.failing, 10*time.Second, "failure reported to the observer")
	require.Equal(t, name, f.Name)
	require.Equal(t, observe.KindMutex, f.Kind)
	require.Greater(t, f.LeaseLeft, time.Duration(0))
	require.Error(t, f.Err)

	loss := logs.await(t, lease+10*time.Second, "loss", func(r logRecord) bool { return r.msg == observe.EventHoldEnd })
	require.Equal(t, slog.LevelWarn, loss.level)
	require.Equal(t, name, loss.attrs[observe.AttrName].String())
	require.Equal(t, observe.HoldLost.String(), loss.attrs[observe.AttrOutcome].String())
	require.Equal(t, observe.LossDeadline.String(), loss.attrs[observe.AttrLoss].String())
	require.Contains(t, loss.attrs["error"].String(), "its last renewal failed")
	<-l.Done()
	require.ErrorIs(t, l.Err(), rlock.ErrLockLost)
	end := recvWithin(t, obs.ends, 10*time.Second, "hold end")
	require.Equal(t, observe.LossDeadline, end.Loss)

	n := 0
	for _, r := range logs.lines() {
		if r.msg == observe.EventHoldEnd {
			n++
		}
	}
	require.Equal(t, 1, n, "one loss line")
}

// TestOutageRecoveryIsLogged: a server frozen for less than the lease (SIGSTOP)
// makes the renewals fail, logged with the lease left; once it answers
// again, one info line says the renewals recovered, after how many failed
// rounds and how long; the lock is still held.
func TestOutageRecoveryIsLogged(t *testing.T) {
	const lease = 15 * time.Second
	srv := redistest.StartControllable(t)
	logs := newRecordHandler()
	obs := newHealthObserver()
	c := newClient(t, srv.Client(t), rlock.WithWatchdogTimeout(lease), rlock.WithRenewInterval(time.Second),
		rlock.WithObserver(obs), rlock.WithLogger(slog.New(logs)))
	name := redistest.Name(t)
	ctx := testCtx(t, time.Minute)
	l, err := c.NewMutex(name).Lock(ctx)
	require.NoError(t, err)
	recvWithin(t, obs.renewed, 10*time.Second, "renewal")

	require.NoError(t, srv.Signal(syscall.SIGSTOP))
	t.Cleanup(func() { _ = srv.Signal(syscall.SIGCONT) })
	warn := logs.await(t, lease, "failed renewal", func(r logRecord) bool { return r.msg == observe.EventRenewal })
	require.Equal(t, slog.LevelWarn, warn.level)
	require.Equal(t, name, warn.attrs[observe.AttrName].String())
	require.Greater(t, warn.attrs[observe.AttrLeaseLeft].Duration(), time.Duration(0))
	require.NoError(t, srv.Signal(syscall.SIGCONT))

	rec := logs.await(t, lease, "recovery", func(r logRecord) bool {
		return r.msg == observe.EventRenewal && r.level == slog.LevelInfo
	})
	require.Equal(t, observe.RenewOK.String(), rec.attrs[observe.AttrOutcome].String())
	require.True(t, rec.attrs["recovered"].Bool())
	require.GreaterOrEqual(t, rec.attrs[observe.AttrFailedRounds].Int64(), int64(1))
	require.Greater(t, rec.attrs[observe.AttrFailedFor].Duration(), time.Duration(0))
	r := recvWithin(t, obs.recovered, 10*time.Second, "recovery reported to the observer")
	require.GreaterOrEqual(t, r.Rounds, 1)
	require.Equal(t, 1, r.Holds)
	require.NoError(t, l.Err(), "the lock is still held")
	require.NoError(t, l.Unlock(ctx))
	for _, r := range logs.lines() {
		require.NotEqual(t, observe.EventHoldEnd, r.msg, "no loss")
	}
}
