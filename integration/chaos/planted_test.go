package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Planted client bugs (test doubles of buggy clients, see Plant*): the checker
// must report each as a bug, not as an effect inherent to leases.
func TestChaosPlantedBugsCaught(t *testing.T) {
	planted := []scenario{
		// Fixed leases of 150 ms and sections of up to 300 ms: a lease runs out,
		// the next holder takes the lock, and the plain DEL removes its hold
		// (which its holder learns at once: a loss no fault explains).
		{Name: "planted-del-release", Planted: PlantDelRelease, Fault: "none", Kinds: []string{KindMutex},
			FixedLease: 150 * time.Millisecond, Work: 300 * time.Millisecond, Names: 1, Dur: 3 * time.Second},
		// A holder frozen for 1 s loses its 300 ms hold to the next; once resumed,
		// the double's own renewal puts its field back beside the new holder's and
		// it goes on writing, trusting that renewal.
		{Name: "planted-renew-after-loss", Planted: PlantRenewAfterLoss, Fault: "sigstop", Kinds: []string{KindMutex},
			Lease: 500 * time.Millisecond, FixedLease: 300 * time.Millisecond, Work: 900 * time.Millisecond, Names: 1,
			Dur: 4 * time.Second, Every: 1200 * time.Millisecond},
		// A holder frozen past its lease writes on after it resumes, never asking Err.
		{Name: "planted-past-deadline", Planted: PlantPastDeadline, Fault: "sigstop", Kinds: []string{KindMutex, KindFenced},
			Lease: 500 * time.Millisecond, Work: 1500 * time.Millisecond, Names: 1, Dur: 4 * time.Second, Every: 1200 * time.Millisecond},
	}
	for _, s := range planted {
		t.Run(s.Name, func(t *testing.T) {
			r := catch(t, s)
			require.Equal(t, "FAIL", r.Verdict, "the checker missed the planted bug in %d runs", plantedRuns)
			require.Equal(t, "bug", r.Classified)
			require.True(t, r.Violations > 0 || r.Linearizable == "no" || r.Unexplained > 0,
				"neither overlaps, nor the linearizability check, nor a loss without a fault saw it")
		})
	}
}

// plantedRuns is how many runs a planted bug gets to show itself: a fault
// lands at a random point of a hold, and one that lands after the section's
// last write (a freeze during the release) leaves no overlap to see. On a
// loaded machine a run sees fewer faults, so one run in twenty may miss.
const plantedRuns = 3

// catch runs s until the checker fails it, at most plantedRuns times, and
// returns the last result.
func catch(t *testing.T, s scenario) result {
	var r result
	for i := range plantedRuns {
		r = run(t, s)
		if r.Verdict == "FAIL" {
			return r
		}
		t.Logf("run %d of %d: the faults missed the planted bug (%d faults, %d acquisitions)",
			i+1, plantedRuns, r.Faults, r.Acquisitions)
	}
	return r
}
