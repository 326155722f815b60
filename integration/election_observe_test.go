package integration

// An election's calls, terms and changes of leader through the client's
// observer (issue 30, item 5).

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/stretchr/testify/require"
)

// electRecorder is a recorder that also keeps the changes of leader.
type electRecorder struct {
	*recorder
	cmu     sync.Mutex
	changes []observe.LeaderChange
}

func (r *electRecorder) LeaderChanged(c observe.LeaderChange) {
	r.cmu.Lock()
	defer r.cmu.Unlock()
	r.changes = append(r.changes, c)
}

func (r *electRecorder) seen() []observe.LeaderChange {
	r.cmu.Lock()
	defer r.cmu.Unlock()
	return append([]observe.LeaderChange(nil), r.changes...)
}

// TestElectionObserved: Campaign, Proclaim, Leader and Resign are calls of
// kind election with their own span names, a term is a hold of kind election
// that ends released, a campaign that waited says so, a cancelled one is
// "canceled", and the follower's changes of leader reach the observer.
func TestElectionObserved(t *testing.T) {
	rec := &electRecorder{recorder: newRecorder()}
	rdb := redistest.Shared(t).Client(t)
	c := newClient(t, rdb, rlock.WithObserver(rec), rlock.WithRecheckInterval(time.Minute))
	other := newClient(t, redistest.Shared(t).Client(t))
	name := redistest.Name(t)
	ctx := testCtx(t, 30*time.Second)
	e := c.NewElection(name)
	obs := e.Observe(ctx)
	awaitInfo(t, obs, electBound, func(rlock.LeaderInfo) bool { return true })

	l, err := e.Campaign(ctx, "a")
	require.NoError(t, err)
	got := rec.last(t, observe.KindElection, observe.OpCampaign)
	require.Equal(t, observe.OutcomeOK, got.res.Outcome)
	require.False(t, got.res.Waited)
	require.True(t, rec.read(func(r *recorder) bool { return r.holds[observe.KindElection] == 1 }), "a term is a hold")
	awaitInfo(t, obs, electBound, func(i rlock.LeaderInfo) bool { return i.Token == l.Token() })
	require.NoError(t, l.Proclaim(ctx, "b"))
	require.Equal(t, observe.OutcomeOK, rec.last(t, observe.KindElection, observe.OpProclaim).res.Outcome)
	awaitInfo(t, obs, electBound, func(i rlock.LeaderInfo) bool { return i.Value == "b" })
	_, err = e.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, observe.OutcomeOK, rec.last(t, observe.KindElection, observe.OpLeader).res.Outcome)
	require.NoError(t, l.Resign(ctx))
	require.Equal(t, observe.OutcomeOK, rec.last(t, observe.KindElection, observe.OpResign).res.Outcome)
	require.Equal(t, []observe.HoldOutcome{observe.HoldReleased}, rec.holdEnds(name))
	awaitInfo(t, obs, electBound, func(i rlock.LeaderInfo) bool { return !i.Elected() })
	// The observer hears of a change once the channel has delivered it: just
	// after the receive above, not before.
	require.Eventually(t, func() bool { return len(rec.seen()) == 3 }, electBound, time.Millisecond)
	require.Equal(t, []observe.LeaderChange{
		{Name: name, Elected: true, Token: l.Token(), NewTerm: true},
		{Name: name, Elected: true, Token: l.Token()},
		{Name: name, Token: l.Token()},
	}, rec.seen())

	// A campaign that waits, and one cancelled while waiting.
	held, err := other.NewElection(name).Campaign(ctx, "other")
	require.NoError(t, err)
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = e.Campaign(cctx, "late")
	cancel()
	require.ErrorIs(t, err, rlock.ErrNotAcquired)
	got = rec.last(t, observe.KindElection, observe.OpCampaign)
	require.Equal(t, observe.OutcomeTimeout, got.res.Outcome)
	require.True(t, got.res.Waited)
	waiting := campaignAsync(ctx, e, "next")
	require.Eventually(t, func() bool { return rec.read(func(r *recorder) bool { return r.waiting[observe.KindElection] == 1 }) },
		electBound, time.Millisecond, "the campaign waits")
	require.NoError(t, held.Resign(ctx))
	r := <-waiting
	require.NoError(t, r.err)
	require.True(t, rec.last(t, observe.KindElection, observe.OpCampaign).res.Waited)
	require.NoError(t, r.l.Resign(ctx))
	require.Equal(t, "holdfast.Leadership.Resign", observe.SpanName(observe.KindElection, observe.OpResign))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, e := range rec.calls {
		require.True(t, e.ownCtx, "End of %v got Start's ctx", observe.SpanName(e.call.Kind, e.call.Op))
	}
}
