package identity

import (
	"strings"
	"testing"
	"time"
)

func TestRecordString(t *testing.T) {
	started := time.Now().Add(-time.Hour)
	r := Record{Client: "1a2b3c4d-0000-4000-8000-000000000000", Service: "orders svc", Host: "host-3", PID: 4121, Started: started}
	want := "orders svc on host-3, pid 4121, since " + started.Local().Format("15:04:05")
	if got := r.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	r.Started = started.Add(-48 * time.Hour)
	if got := r.String(); !strings.Contains(got, r.Started.Local().Format("2006-01-02")) {
		t.Errorf("a start days ago gives its date: %q", got)
	}
	if got := r.ConnName("watchdog"); got != "holdfast:orders_svc:1a2b3c4d:watchdog" {
		t.Errorf("ConnName = %q", got)
	}
}

func TestSelf(t *testing.T) {
	r := Self("id", "")
	if r.Service == "" || r.PID == 0 || r.Version == "" || r.Started.IsZero() {
		t.Errorf("Self = %+v", r)
	}
	if Self("id", "svc").Service != "svc" {
		t.Error("the service given is kept")
	}
	if Key("id") != "holdfast:client:id" {
		t.Errorf("Key = %q", Key("id"))
	}
}
