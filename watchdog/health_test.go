package watchdog

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/redis/go-redis/v9"
)

// healthLog is a RenewObserver and RenewHealthObserver that passes on what
// it hears, and a log: a file, which takes the watchdog's writes and the
// test's reads at once.
type healthLog struct {
	ok        chan struct{}
	failing   chan observe.RenewFailure
	recovered chan observe.RenewRecovery
	*os.File
}

func newHealthLog(t *testing.T) *healthLog {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &healthLog{ok: make(chan struct{}, 100), failing: make(chan observe.RenewFailure, 100),
		recovered: make(chan observe.RenewRecovery, 100), File: f}
}

func (l *healthLog) Renewed(o observe.RenewOutcome, _ int) {
	if o == observe.RenewOK {
		select {
		case l.ok <- struct{}{}:
		default:
		}
	}
}
func (l *healthLog) RenewFailing(f observe.RenewFailure)    { l.failing <- f }
func (l *healthLog) RenewRecovered(r observe.RenewRecovery) { l.recovered <- r }

// String returns what was logged so far.
func (l *healthLog) String() string {
	b, err := os.ReadFile(l.Name())
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10s", what)
		panic("unreachable")
	}
}

// A hold whose renewals fail is told to the log (a warning naming it, with
// the lease it has left and the error) and to the observer; the first round
// that renews again says so once; a loss at the deadline says the last
// renewal's error; nothing is logged while renewals succeed, nor at Close.
func TestRenewalFailuresAreTold(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	defer rdb.Close()
	obs := newHealthLog(t)
	const lease = 1500 * time.Millisecond
	w := New(rdb, Options{Timeout: lease, Interval: 100 * time.Millisecond, Observer: obs,
		Logger: slog.New(slog.NewTextHandler(obs, nil))})
	defer w.Close()
	mr.HSet("jobs", "f", "1")
	lost := make(chan error, 1)
	w.WatchAs(Label{Kind: observe.KindFairMutex, Name: "jobs"}, lua.Renewal{Kind: lua.RenewLockHold, Key: "jobs", Member: "f"},
		time.Now().Add(lease), true, lua.Acks{}, func(err error) { lost <- err })

	recv(t, obs.ok, "renewal")
	recv(t, obs.ok, "second renewal")
	if s := obs.String(); s != "" {
		t.Fatalf("logged on the happy path:\n%s", s)
	}

	mr.Close()
	f := recv(t, obs.failing, "failed round")
	if f.Kind != observe.KindFairMutex || f.Name != "jobs" || f.Holds != 1 || f.Rounds != 1 || f.Err == nil {
		t.Fatalf("failure %+v", f)
	}
	if f.LeaseLeft <= 0 || f.LeaseLeft > lease {
		t.Fatalf("lease left %v, want within (0, %v]", f.LeaseLeft, lease)
	}
	if f2 := recv(t, obs.failing, "second failed round"); f2.Rounds != 2 || f2.LeaseLeft >= f.LeaseLeft {
		t.Fatalf("second failure %+v after %+v", f2, f)
	}
	if err := mr.Restart(); err != nil {
		t.Fatal(err)
	}
	r := recv(t, obs.recovered, "recovery")
	if r.Rounds < 2 || r.FailedFor <= 0 || r.Holds != 1 {
		t.Fatalf("recovery %+v", r)
	}
	out := obs.String()
	t.Logf("log:\n%s", out)
	warns := strings.Count(out, "level=WARN msg="+observe.EventRenewal+" ")
	if warns < 1 || warns > r.Rounds {
		t.Fatalf("%d warnings for %d failed rounds", warns, r.Rounds)
	}
	for _, want := range []string{"holdfast.kind=fair_mutex", "holdfast.name=jobs", observe.AttrLeaseLeft + "=",
		"holdfast.outcome=failed", "error=", "level=INFO msg=" + observe.EventRenewal + " holdfast.outcome=ok recovered=true"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the log lacks %q", want)
		}
	}
	if n := strings.Count(out, "recovered=true"); n != 1 {
		t.Fatalf("%d recovery lines", n)
	}

	mr.Close()
	err := recv(t, lost, "loss")
	if !errors.Is(err, ErrNotRenewed) || !strings.Contains(err.Error(), "its last renewal failed: ") {
		t.Fatalf("lost with %v", err)
	}
	if Cause(err) != observe.LossDeadline {
		t.Fatalf("cause %v", Cause(err))
	}
	before := obs.String()
	w.Close()
	if after := obs.String(); after != before {
		t.Fatalf("logged at Close:\n%s", strings.TrimPrefix(after, before))
	}
}
