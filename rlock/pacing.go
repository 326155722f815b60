package rlock

import "time"

// maxHandOffs is how many times in a row a release may hand the lock straight to
// a waiter of the same client while other clients wait for it too; after that,
// only while more other clients than the streak listen (the release script
// counts them): a client keeps the lock for at most max(maxHandOffs, other
// clients) turns in a row. Then the release is published, so that waiters of
// other processes get their turn. The race a published release starts costs
// one attempt per waiting client; paid once per that many turns, it keeps the
// round trips per acquisition under 2 whatever the number of processes (a
// streak of 3 cost 1 + processes ÷ 4: 9 at 32 processes).
const maxHandOffs = 3

// yieldStep paces the race that follows a published release: a head that has
// heard fewer releases by other clients since its client last held the lock waits
// a little longer before attempting, yieldStep times (yieldRounds - heard), so
// that the client that has waited longest attempts at once and the one that just
// released (which does not count its own release) comes last.
const (
	yieldStep   = 150 * time.Microsecond
	yieldRounds = 3
)

// echoWait bounds how long the head of a client that published a release waits
// for that release's own message before it paces its attempt anyway: normally
// the message comes back first and the head attempts yieldRounds steps after it,
// last of all the clients' heads; a lost message costs at most this.
const echoWait = time.Millisecond

// pacing orders this client's turns on one lock with other processes: it counts
// the hand-offs in a row inside the client and the releases heard since the
// client last held the lock, and turns them into a delay before the head's next
// attempt. It only orders holdfast clients that wait; the lock stays non-fair,
// as Redisson's RLock.
type pacing struct {
	streak int // hand-offs since the lock was last published or taken by an attempt
	seen   int // release messages heard since an owner of this client acquired
	echoes int // releases this client published while it had waiters: their messages are not counted in seen
}

// acquired records that an owner of this client took the lock.
func (p *pacing) acquired() {
	p.seen = 0
	p.echoes = 0
}

// attemptWon records that the lock was taken by an attempt, not a hand-off.
func (p *pacing) attemptWon() { p.streak = 0 }

// handedOff records a hand-off inside the client.
func (p *pacing) handedOff() { p.streak++ }

// limit returns the Streak of the next release's hand-off (lua.ReleaseArgs):
// 0 while the client may hand the lock over whoever waits, else its streak,
// which the script compares with the number of other clients listening.
func (p *pacing) limit() int {
	if p.streak < maxHandOffs {
		return 0
	}
	return p.streak
}

// published records a release this client published, and returns how long its
// own head waits at most before attempting: the message's echo normally comes
// first and sets the delay (heard), so that other clients' heads go first.
func (p *pacing) published(waiting bool) time.Duration {
	p.streak = 0
	if waiting {
		p.echoes++
	}
	return echoWait + yieldStep*yieldRounds
}

// heard records a release message and returns how long the head waits before
// attempting. The client's own published releases are not counted.
func (p *pacing) heard() time.Duration {
	if p.echoes > 0 {
		p.echoes--
	} else {
		p.seen++
	}
	return yieldStep * time.Duration(max(yieldRounds-p.seen, 0))
}
