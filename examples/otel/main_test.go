package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// A real redis-server per test (the integration harness), stopped at the end;
// Main also checks that no goroutine outlived the tests.
func TestMain(m *testing.M) { redistest.Main(m) }

// TestRun runs the example once, as `go run .` does, and reads what it
// printed as Prometheus would: the families a dashboard needs are there, with
// one point per call, hold and wake-up of the workload, and nothing is left
// held or waiting, in the client or in Redis.
func TestRun(t *testing.T) {
	srv := redistest.Start(t)
	const workers, rounds = 4, 10
	var out bytes.Buffer
	// Holds of 5 ms outlive the tracker's first look (2 ms after a hold began,
	// at its next tick), so that every run tracks the key and reports the
	// tracking mode the README's sample shows; a 2 ms hold may end just before.
	err := run(t.Context(), "redis://"+srv.Addr, &out, config{workers: workers, rounds: rounds, hold: 5 * time.Millisecond})
	if err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	defer func() {
		if t.Failed() {
			t.Logf("output:\n%s", out.String())
		}
	}()
	families := parse(t, out.String())
	for name := range families {
		if !strings.HasPrefix(name, "holdfast_") {
			t.Errorf("printed %s: only the holdfast_* families should be printed", name)
		}
	}

	// One acquisition per round and worker, on each object; some of them
	// found it taken and waited (Prometheus' names: unit "s" becomes
	// _seconds, counters get _total, {annotations} are dropped).
	const calls = workers * rounds
	acquire := family(t, families, "holdfast_acquire_duration_seconds", dto.MetricType_HISTOGRAM)
	for _, kind := range []string{"mutex", "semaphore"} {
		op := map[string]string{"mutex": "lock", "semaphore": "acquire"}[kind]
		all := count(acquire, "holdfast_kind", kind, "holdfast_operation", op, "holdfast_outcome", "ok")
		waited := count(acquire, "holdfast_kind", kind, "holdfast_operation", op, "holdfast_outcome", "ok", "holdfast_waited", "true")
		if all != calls || waited == 0 {
			t.Errorf("holdfast_acquire_duration_seconds{kind=%s}: %d points (want %d), %d with holdfast_waited=\"true\" (want some)", kind, all, calls, waited)
		}
	}
	ops := family(t, families, "holdfast_operation_duration_seconds", dto.MetricType_HISTOGRAM)
	for _, want := range []struct {
		kind, op string
		n        uint64
	}{{"mutex", "lease_unlock", calls}, {"semaphore", "release", calls}, {"count_down_latch", "count_down", workers}, {"count_down_latch", "await", 1}} {
		if got := count(ops, "holdfast_kind", want.kind, "holdfast_operation", want.op, "holdfast_outcome", "ok"); got != want.n {
			t.Errorf("holdfast_operation_duration_seconds{kind=%s,operation=%s,outcome=ok}: %d points, want %d", want.kind, want.op, got, want.n)
		}
	}

	// A hold per Lock, each released by its Unlock; a semaphore's permits
	// are not holds.
	holds := family(t, families, "holdfast_hold_duration_seconds", dto.MetricType_HISTOGRAM)
	if got := count(holds, "holdfast_kind", "mutex", "holdfast_outcome", "released"); got != calls {
		t.Errorf("holdfast_hold_duration_seconds{kind=mutex,outcome=released}: %d points, want %d", got, calls)
	}
	if got := count(holds); got != calls {
		t.Errorf("holdfast_hold_duration_seconds: %d points in all, want %d (the mutex's only)", got, calls)
	}

	// Waiters woke (mostly on messages), and none is left.
	wakeups := family(t, families, "holdfast_wait_wakeups_total", dto.MetricType_COUNTER)
	if got := count(wakeups, "holdfast_kind", "mutex"); got == 0 {
		t.Errorf("holdfast_wait_wakeups_total{kind=mutex}: no wake-up in a contended workload")
	}
	for _, name := range []string{"holdfast_hold_active", "holdfast_wait_active", "holdfast_pubsub_subscriptions"} {
		for _, m := range family(t, families, name, dto.MetricType_GAUGE).GetMetric() {
			if v := m.GetGauge().GetValue(); v != 0 {
				t.Errorf("%s%s = %v after run, want 0", name, labels(m), v)
			}
		}
	}

	// The spans: one per call, with go-redis' command spans under them.
	if want := fmt.Sprintf("# span holdfast.Mutex.Lock %d\n", calls); !strings.Contains(out.String(), want) {
		t.Errorf("output does not count the spans of every Lock: no line %q", want)
	}
	if m := regexp.MustCompile(`# spans .*: (\d+) go-redis command spans under holdfast spans; 0 holdfast spans with an error status`).FindStringSubmatch(out.String()); m == nil || m[1] == "0" {
		t.Errorf("output does not show go-redis command spans under holdfast's, or shows error spans")
	}

	// The README's sample shows the families and their help as they are.
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(readme), "\n") {
		if (strings.HasPrefix(line, "# HELP holdfast_") || strings.HasPrefix(line, "# TYPE holdfast_")) && !strings.Contains(out.String(), line+"\n") {
			t.Errorf("README.md shows %q, which the run does not print: update its sample from a run", line)
		}
	}
	// And every series the run prints is in the sample (values and the
	// trimmed _bucket lines aside).
	shown := seriesOf(string(readme))
	for s := range seriesOf(out.String()) {
		if !shown[s] {
			t.Errorf("the run prints the series %s, which README.md's sample lacks: update the sample from a run", s)
		}
	}

	checkNothingLeft(t, srv)
}

// TestListen runs the example with -listen until interrupted: /metrics serves
// holdfast's and redisotel's metrics while it runs, and the interrupt leaves
// nothing behind.
func TestListen(t *testing.T) {
	srv := redistest.Start(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := newFileOutput(t)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, "redis://"+srv.Addr, out, config{listen: "127.0.0.1:0", workers: 3, rounds: 5, hold: time.Millisecond})
	}()

	addr := regexp.MustCompile(`serving (http://\S+/metrics)`)
	var url string
	var body string
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if url == "" {
			if m := addr.FindStringSubmatch(out.String()); m != nil {
				url = m[1]
			}
			continue
		}
		body = get(t, client, url)
		if strings.Contains(body, "holdfast_acquire_duration_seconds_count{") {
			break
		}
	}
	if url == "" {
		t.Fatalf("no \"serving\" line; output:\n%s", out.String())
	}
	families := parse(t, body)
	family(t, families, "holdfast_acquire_duration_seconds", dto.MetricType_HISTOGRAM)
	family(t, families, "holdfast_hold_duration_seconds", dto.MetricType_HISTOGRAM)
	family(t, families, "holdfast_wait_wakeups_total", dto.MetricType_COUNTER)
	redisotel := false
	for name := range families {
		redisotel = redisotel || strings.HasPrefix(name, "db_client_")
	}
	if !redisotel {
		t.Errorf("/metrics serves no db_client_* family (redisotel's)")
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run after the interrupt: %v\noutput:\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("run did not return within 30 s of the interrupt")
	}
	checkNothingLeft(t, srv)
}

// checkNothingLeft fails t if the workload's objects are still in Redis, or
// if any key is left without an expiry: the only keys holdfast leaves are its
// request and unlock markers, which expire within go-redis' retry window.
func checkNothingLeft(t *testing.T, srv *redistest.Server) {
	t.Helper()
	rdb := srv.Client(t)
	ctx := t.Context()
	for _, name := range []string{mutexName, semaphoreName, latchName} {
		if n, err := rdb.Exists(ctx, name).Result(); err != nil || n != 0 {
			t.Errorf("%s is still in Redis after run (%v)", name, err)
		}
	}
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		if ttl, err := rdb.PTTL(ctx, key).Result(); err != nil || ttl < 0 {
			t.Errorf("key %s is left without an expiry (PTTL %v, %v)", key, ttl, err)
		}
	}
}

// parse reads text in Prometheus' text format.
func parse(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("not Prometheus' text format: %v\n%s", err, text)
	}
	return families
}

// family returns the family called name, failing t if it is missing or not
// of type typ.
func family(t *testing.T, families map[string]*dto.MetricFamily, name string, typ dto.MetricType) *dto.MetricFamily {
	t.Helper()
	mf, ok := families[name]
	if !ok {
		have := make([]string, 0, len(families))
		for n := range families {
			have = append(have, n)
		}
		t.Fatalf("no metric family %s; have %v", name, have)
	}
	if mf.GetType() != typ {
		t.Errorf("%s is a %v, want a %v", name, mf.GetType(), typ)
	}
	return mf
}

// count sums the counts of mf's histograms, or the values of its counters,
// over the metrics with the given label pairs (name, value, name, value...).
func count(mf *dto.MetricFamily, pairs ...string) uint64 {
	var n uint64
	for _, m := range mf.GetMetric() {
		if matches(m, pairs) {
			n += m.GetHistogram().GetSampleCount() + uint64(m.GetCounter().GetValue())
		}
	}
	return n
}

func matches(m *dto.Metric, pairs []string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			found = found || l.GetName() == pairs[i] && l.GetValue() == pairs[i+1]
		}
		if !found {
			return false
		}
	}
	return true
}

func labels(m *dto.Metric) string {
	var b strings.Builder
	for _, l := range m.GetLabel() {
		if strings.HasPrefix(l.GetName(), "holdfast_") {
			fmt.Fprintf(&b, "%s=%q,", l.GetName(), l.GetValue())
		}
	}
	return "{" + strings.TrimSuffix(b.String(), ",") + "}"
}

func get(t *testing.T, client *http.Client, url string) string {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	return string(b)
}

// fileOutput is the program's output in a file, which takes the program's
// writes and the test's reads at once.
type fileOutput struct{ *os.File }

func newFileOutput(t *testing.T) fileOutput {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return fileOutput{f}
}

// String returns what the program wrote so far.
func (f fileOutput) String() string {
	b, err := os.ReadFile(f.Name())
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// seriesOf returns the holdfast_* series in a Prometheus text output: the
// name and labels of each sample line, the _bucket lines and the labels every
// series carries (otel_scope_*, le) left out, values dropped.
func seriesOf(text string) map[string]bool {
	out := map[string]bool{}
	for line := range strings.SplitSeq(text, "\n") {
		if !strings.HasPrefix(line, "holdfast_") {
			continue
		}
		name, rest, _ := strings.Cut(line, "{")
		if strings.HasSuffix(name, "_bucket") {
			continue
		}
		name, _, _ = strings.Cut(name, " ")
		labels, _, _ := strings.Cut(rest, "}")
		var kept []string
		for kv := range strings.SplitSeq(labels, ",") {
			if kv != "" && !strings.HasPrefix(kv, "otel_scope_") && !strings.HasPrefix(kv, "le=") {
				kept = append(kept, kv)
			}
		}
		out[name+"{"+strings.Join(kept, ",")+"}"] = true
	}
	return out
}
