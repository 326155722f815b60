package chaos

import (
	"os"
	"testing"
)

// full reports whether the full tier runs (HOLDFAST_CHAOS=full, make chaos).
func full() bool { return os.Getenv("HOLDFAST_CHAOS") == "full" }

func TestChaosShort(t *testing.T) {
	if full() {
		t.Skip("the full tier runs TestChaosFull")
	}
	r := run(t, scenario{Name: "short-sigkill", Fault: "sigkill", Kinds: []string{KindMutex, KindFenced}, Dur: 5 * 1e9, Every: 2e9})
	t.Log(r.Verdict)
}
