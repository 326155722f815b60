package watchdog

import "time"

// Tick pacing: at most maxTickGaps delays between ticks; the checker stops
// after idleTicks ticks in a row without new holds.
const (
	maxTickGaps = 16
	idleTicks   = 8
)

// tickPolicy paces the checker's ticks (see tracker): it ticks while new
// holds come, every delay while its ticks find holds to look at, less and
// less often while they find none, and stops after idleTicks ticks without
// new holds and with nothing left to look at. It decides only; the checker
// sets the timer. Its owner's mutex guards it.
type tickPolicy struct {
	delay   time.Duration
	ticking bool          // the checker ticks: new holds need no poke
	came    bool          // a new hold came since the last tick
	gap     time.Duration // the time between ticks, from delay to maxTickGaps delays
	idle    int           // ticks in a row without new holds
}

// newTickPolicy returns the policy of a checker whose new holds wait delay.
func newTickPolicy(delay time.Duration) tickPolicy {
	return tickPolicy{delay: delay, gap: delay}
}

// arrived records a new hold; it reports whether the checker must be poked
// (it was not ticking, and ticks from now on).
func (p *tickPolicy) arrived() (poke bool) {
	p.came = true
	if p.ticking {
		return false
	}
	p.ticking = true
	return true
}

// retrying records that holds wait to be looked at again: the checker ticks
// until then.
func (p *tickPolicy) retrying() { p.ticking = true }

// next returns the gap to the next tick, after a tick that found new holds to
// look at (looked) or not, with holds still waiting (new ones, or ones to
// look at again) or not: the delay after a tick that looked; twice the last
// gap, up to maxTickGaps delays, after one that did not though new holds
// came. 0: no tick, as the checker does not tick (news woke it), or stops
// now, after idleTicks ticks without new holds nor waiting ones.
func (p *tickPolicy) next(looked, waiting bool) time.Duration {
	came := p.came
	p.came = false
	if !p.ticking {
		return 0
	}
	switch {
	case looked:
		p.gap, p.idle = p.delay, 0
	case came:
		p.gap, p.idle = min(2*p.gap, maxTickGaps*p.delay), 0
	case !waiting:
		if p.idle++; p.idle >= idleTicks {
			p.ticking, p.gap, p.idle = false, p.delay, 0
			return 0
		}
	}
	return p.gap
}

// arrivals are the new holds (H: *Hold) the tracker has yet to look at, in
// the order they came. The tracker owns the fact that a hold is new: a hold
// is one from add until take or drop. Its owner's mutex guards it.
type arrivals[H comparable] struct {
	since map[H]time.Time // when each new hold came
	queue []arrival[H]    // oldest first; an entry whose hold is no longer new, or new since later, is skipped
}

// arrival is one entry of arrivals' queue.
type arrival[H comparable] struct {
	h  H
	at time.Time
}

// add records h as new at now, unless it is already; it reports whether it
// was not.
func (a *arrivals[H]) add(h H, now time.Time) bool {
	if _, ok := a.since[h]; ok {
		return false
	}
	if a.since == nil {
		a.since = make(map[H]time.Time)
	}
	a.since[h] = now
	a.queue = append(a.queue, arrival[H]{h, now})
	return true
}

// drop forgets h, which ended before the tracker looked at it.
func (a *arrivals[H]) drop(h H) {
	if _, ok := a.since[h]; !ok {
		return
	}
	delete(a.since, h)
	if len(a.since) == 0 {
		clear(a.queue)
		a.queue = a.queue[:0]
	}
}

// has reports whether h is new.
func (a *arrivals[H]) has(h H) bool {
	_, ok := a.since[h]
	return ok
}

// len returns how many holds are new.
func (a *arrivals[H]) len() int { return len(a.since) }

// live reports whether e is the entry of a hold still new since then.
func (a *arrivals[H]) live(e arrival[H]) bool {
	at, ok := a.since[e.h]
	return ok && at.Equal(e.at)
}

// take takes the new holds that came by before (every one with all), oldest
// first: they are no longer new.
func (a *arrivals[H]) take(before time.Time, all bool) []H {
	var out []H
	i := 0
	for ; i < len(a.queue); i++ {
		e := a.queue[i]
		if !a.live(e) {
			continue
		}
		if !all && e.at.After(before) {
			break
		}
		delete(a.since, e.h)
		out = append(out, e.h)
	}
	n := copy(a.queue, a.queue[i:])
	clear(a.queue[n:])
	a.queue = a.queue[:n]
	return out
}

// oldest returns when the oldest new hold came; false when none is new.
func (a *arrivals[H]) oldest() (time.Time, bool) {
	for _, e := range a.queue {
		if a.live(e) {
			return e.at, true
		}
	}
	return time.Time{}, false
}
