package rlock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
)

// Errors of an election.
var (
	// ErrNoLeader: Election.Leader found no leader (the election's lock is
	// free).
	ErrNoLeader = errors.New("rlock: no leader")
	// ErrNotLeader: Leadership.Proclaim or Resign on a leadership that has
	// ended (resigned, lost, closed); the error also matches the reason
	// Leadership.Err gives.
	ErrNotLeader = errors.New("rlock: not the leader")
)

// Election is a handle on one leader election (etcd's concurrency.Election,
// over a holdfast lock): candidates Campaign, one of them leads at a time,
// and followers read the leader (Leader) or are told of every change
// (Observe). It stores only the client and the name, so it is cheap and safe
// for concurrent use.
//
// The leadership is the fenced lock at the election's name (Redisson's RLock
// hash, fencing tokens from redisson_lock_token:{name}), held with the
// watchdog: a leader that dies or is paused past the watchdog timeout loses
// it, and the next candidate takes it. Each term has a fencing token greater
// than every earlier term's. The leader's value, token and start live in the
// hash {name}:leader, written in the same script step as the acquisition;
// changes are announced on holdfast_election:{name}. A Java process that locks
// the same name with Redisson's getFencedLock takes part as a candidate (see
// docs/election.md for what followers then see).
type Election struct {
	c    *Client
	name string
	lk   *lockDef
	bad  error
	// seen is the greatest term token this handle has reported (Leader,
	// Observe, Campaign): Observe never delivers an older term.
	seen atomic.Int64
}

// NewElection returns a handle on the election called name. Names follow the
// rules of NewMutex; a name whose leader record or channel would fall in
// another Redis Cluster slot makes every method return an error matching
// ErrInvalidArgument.
func (c *Client) NewElection(name string) *Election {
	e := &Election{c: c, name: name, lk: newLockDef(name, lua.LayoutLock, kind{fenced: true, elect: true})}
	if name == "" {
		e.bad = fmt.Errorf("%w: empty election name", ErrInvalidArgument)
	} else if err := lua.CheckElectionName(name); err != nil {
		e.bad = fmt.Errorf("%w: election name %s: %w", ErrInvalidArgument, quote(name), err)
	}
	return e
}

// Name returns the election's name: the name of its lock.
func (e *Election) Name() string { return e.name }

// LeaderInfo is an election's leader as a follower sees it.
type LeaderInfo struct {
	// Holder is the leader's owner field in the lock's hash, "<client
	// id>:<owner id>"; "" when there is no leader.
	Holder string
	// Token is the fencing token of the leader's term. Without a leader it is
	// the latest term's (0 when no term was ever taken).
	Token int64
	// Value is what the leader proclaimed; "" for a leader that wrote no
	// record (a Java process holding the lock).
	Value string
	// Since is when the term began, on the Redis server's clock; zero for a
	// leader that wrote no record.
	Since time.Time
	// TTL is the lock's remaining lease when read (NoExpiry: none); 0
	// without a leader.
	TTL time.Duration
}

// Elected reports whether the info names a leader.
func (i LeaderInfo) Elected() bool { return i.Holder != "" }

// Campaign waits until the caller leads the election, or ctx is done, and
// returns its Leadership. It proclaims value as the leader's value in the
// same step as it takes the election's lock, and announces the new leader to
// followers. Waiting is a Mutex.Lock's: pub/sub, not polling, so a candidate
// takes over as soon as the leader resigns, and within the leader's remaining
// lease when it died. The lock is held with the watchdog (the client's
// watchdog timeout), whatever ctx's owner: each Campaign is a fresh owner, so
// a second Campaign by a leader waits, as a nested sync.Mutex.Lock.
//
// When ctx ends the wait the error matches both ErrNotAcquired and ctx.Err();
// after Close, ErrClosed. It returns ErrWrongType when the name holds
// something that is not a lock, ErrInvalidArgument for a refused name, and
// wrapped Redis errors. A Campaign that fails leaves no hold behind.
func (e *Election) Campaign(ctx context.Context, value string) (_ *Leadership, err error) {
	ctx, ob := e.startCall(ctx, observe.OpCampaign)
	defer ob.endCall(&err)
	if e.bad != nil {
		return nil, e.bad
	}
	lo := lockOptions{elect: lua.NewElect(e.lk.Lock, value)}
	l, err := e.c.locks.obtain(ctx, e.lk, newOwner(), lo, true, time.Time{})
	if err != nil {
		return nil, err
	}
	e.saw(l.Token())
	return &Leadership{e: e, lease: l, value: value}, nil
}

// Leader returns the current leader: the holder of the election's lock and,
// from the leader record it wrote, its value, term token and start, all read
// atomically in one round trip. With no leader it returns an error matching
// ErrNoLeader, and the LeaderInfo still carries the latest term's Token. A
// record left by a leader that no longer holds the lock is never reported.
// When a process holds the lock without having written a record (a Java
// RFencedLock), it is the leader, with an empty Value, a zero Since and the
// lock's latest token.
func (e *Election) Leader(ctx context.Context) (_ LeaderInfo, err error) {
	ctx, ob := e.startCall(ctx, observe.OpLeader)
	defer ob.endCall(&err)
	return e.leader(ctx)
}

// leader is Leader.
func (e *Election) leader(ctx context.Context) (LeaderInfo, error) {
	if err := e.check(); err != nil {
		return LeaderInfo{}, err
	}
	r, err := lua.Leader(ctx, e.c.rdb, e.lk.Lock)
	if err != nil {
		return LeaderInfo{}, e.wrap(err)
	}
	e.saw(r.Token)
	info := LeaderInfo{Holder: r.Holder, Token: r.Token, Value: r.Value, Since: r.Since}
	if r.Holder == "" {
		return info, fmt.Errorf("%w: election %s", ErrNoLeader, quote(e.name))
	}
	info.TTL = r.TTL
	return info, nil
}

// saw records that the handle reported the term token t.
func (e *Election) saw(t int64) {
	for {
		old := e.seen.Load()
		if t <= old || e.seen.CompareAndSwap(old, t) {
			return
		}
	}
}

// startCall starts reporting a public call of op on e (see Client.begin).
func (e *Election) startCall(ctx context.Context, op observe.Op) (context.Context, *observed) {
	return e.c.obs.startCall(ctx, observe.KindElection, op, e.name)
}

// check returns why no call on e can run: a refused name, a closed client.
func (e *Election) check() error {
	if e.bad != nil {
		return e.bad
	}
	if e.c.ctx.Err() != nil {
		return ErrClosed
	}
	return nil
}

// wrap names the election in err, and reads a WRONGTYPE reply as ErrWrongType.
func (e *Election) wrap(err error) error {
	if lua.IsWrongType(err) {
		return fmt.Errorf("%w: election %s: %v", ErrWrongType, quote(e.name), err)
	}
	return fmt.Errorf("rlock: election %s: %w", quote(e.name), unreachable(e.c.where, err))
}
