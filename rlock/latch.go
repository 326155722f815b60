package rlock

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/pubsub"
)

// CountDownLatch is a countdown latch shared through Redis, Redisson's
// RCountDownLatch: the string key of its name holds the count, and the latch
// is open when the key is absent (counted down to zero, or never set).
// TrySetCount sets it; each CountDown takes one off; Await waits for zero.
//
// Beyond Redisson, Await tells a latch deleted while awaited (its delete
// message heard, its key gone and no opening message heard within latchGrace:
// ErrLatchDeleted) from one that opened, and
// looks again at least every recheck interval (WithRecheckInterval), so that a
// lost message delays it by at most that; Java's await waits for a message
// only. A CountDownLatch is safe for concurrent use.
type CountDownLatch struct {
	o       syncObject
	channel string
}

// NewCountDownLatch returns the latch name (Redisson's getCountDownLatch). A
// name with a '}' (or an empty one) is refused, every call returning an error
// matching ErrInvalidArgument: Redisson's latch channel wraps the whole name
// in braces, so for such a name it would hash to another Redis Cluster slot
// than the name (lua.CheckLatchName).
func (c *Client) NewCountDownLatch(name string) *CountDownLatch {
	return &CountDownLatch{o: newSyncObject(c, name, "latch", observe.KindCountDownLatch, lua.CheckLatchName), channel: lua.LatchChannel(name)}
}

// Name returns the latch's name.
func (l *CountDownLatch) Name() string { return l.o.name }

// TrySetCount sets the count to n (n >= 1) if the latch is not set, and
// reports whether it did (Redisson's trySetCount).
func (l *CountDownLatch) TrySetCount(ctx context.Context, n int64) (_ bool, err error) {
	ctx, ob := l.o.startCall(ctx, observe.OpTrySetCount)
	defer ob.endCall(&err)
	if err := l.o.check(); err != nil {
		return false, err
	}
	if n < 1 {
		return false, fmt.Errorf("%w: latch %s: count must be at least 1, got %d", ErrInvalidArgument, quote(l.o.name), n)
	}
	ok, err := lua.LatchTrySet(ctx, l.o.c.rdb, l.o.name, n, l.o.c.publishCommand(ctx), l.o.request())
	return ok, l.o.wrap(err)
}

// CountDown takes one off the count; at zero the latch opens (its key is
// deleted) and every awaiter, in every process, returns. On a latch that is
// not set it does nothing. A call go-redis sends again after a lost reply
// counts once.
func (l *CountDownLatch) CountDown(ctx context.Context) (err error) {
	ctx, ob := l.o.startCall(ctx, observe.OpCountDown)
	defer ob.endCall(&err)
	if err := l.o.check(); err != nil {
		return err
	}
	_, err = lua.LatchCountDown(ctx, l.o.c.rdb, l.o.name, l.o.c.publishCommand(ctx), l.o.request())
	return l.o.wrap(err)
}

// Count returns the count: 0 when the latch is open or not set.
func (l *CountDownLatch) Count(ctx context.Context) (_ int64, err error) {
	ctx, ob := l.o.startCall(ctx, observe.OpCount)
	defer ob.endCall(&err)
	if err := l.o.check(); err != nil {
		return 0, err
	}
	n, err := lua.Count(ctx, l.o.c.rdb, l.o.name)
	return n, l.o.wrap(err)
}

// Delete deletes the latch and reports whether it was set. Awaiters in
// holdfast clients return ErrLatchDeleted; Java's keep waiting.
func (l *CountDownLatch) Delete(ctx context.Context) (_ bool, err error) {
	ctx, ob := l.o.startCall(ctx, observe.OpDelete)
	defer ob.endCall(&err)
	if err := l.o.check(); err != nil {
		return false, err
	}
	ok, err := lua.LatchDelete(ctx, l.o.c.rdb, l.o.name, l.o.c.publishCommand(ctx), l.o.request())
	return ok, l.o.wrap(err)
}

// Await waits until the count is zero: at once when it is (or the latch is
// not set), else until a read finds it zero (nil) or deleted (an error
// matching ErrLatchDeleted), or ctx is done (an error matching both
// ErrNotAcquired and ctx's error, as every wait of the package; ErrClosed
// once the Client is closed). It decides on the count it reads, woken by the latch's
// messages and at least every recheck interval: a latch that opened and was
// set again before the awaiter read it is awaited on its new count, as Java's
// await does. Deleted means: the count read above zero, then the latch's
// delete (or set) message heard with no opening message, the key gone, and
// still no opening message heard within latchGrace (100 ms) of that read: a
// set message published before a read can arrive after it, ahead of the
// opening message of the same round, so a deletion is told up to latchGrace
// after it. A delete whose message is lost, or that is followed within the
// grace by an opening (the latch set again and counted down), reads as an
// opening: the key is gone either way.
func (l *CountDownLatch) Await(ctx context.Context) (err error) {
	ctx, ob := l.o.startCall(ctx, observe.OpAwait)
	defer ob.endCall(&err)
	if err := l.o.check(); err != nil {
		return err
	}
	var news latchNews // what this awaiter hears on the latch's channel
	var judge latchJudge
	w := syncWait[struct{}]{channel: l.channel, wake: latchWake, heard: news.count, acquiring: true, attempt: func(ctx context.Context) (turn[struct{}], error) {
		if judge.doubting() { // no read: only the news can settle it
			return l.turnOf(judge.settle(news.snapshot(), time.Now()))
		}
		n, err := lua.Count(ctx, l.o.c.rdb, l.o.name)
		now := news.snapshot()
		if err != nil {
			return turn[struct{}]{}, l.o.wrap(err)
		}
		return l.turnOf(judge.judge(n, now, time.Now()))
	}}
	_, err = w.run(ctx, &l.o)
	return err
}

// turnOf is the awaiter's turn for verdict v: left is how long a doubt has
// yet to run.
func (l *CountDownLatch) turnOf(v latchVerdict, left time.Duration) (turn[struct{}], error) {
	switch v {
	case latchSet:
		return turn[struct{}]{sleep: -1}, nil
	case latchDoubt:
		return turn[struct{}]{sleep: left, timer: observe.CauseRecheck}, nil
	case latchDeleted:
		return turn[struct{}]{}, fmt.Errorf("%w: %s", ErrLatchDeleted, quote(l.o.name))
	}
	return turn[struct{}]{done: true}, nil
}

// latchGrace is how long an awaiter that found its latch gone on a set or
// delete message alone listens for an opening message before it says
// deleted. Messages on the channel arrive in the order they were published,
// but a read on another connection is not ordered with them: the set message
// of a round, published before the read that found the count above zero, can
// arrive after that read, then the round's count-down deletes the key, and
// the read that follows the late set message finds the key gone while the
// round's opening message is still on its way.
const latchGrace = 100 * time.Millisecond

// latchVerdict is what an awaiter decides after a read (or, in doubt, after
// news).
type latchVerdict int

const (
	latchOpened  latchVerdict = iota // the latch opened: Await returns nil
	latchSet                         // the count is above zero: wait for news
	latchDoubt                       // gone on a set or delete message alone: listen for an opening
	latchDeleted                     // deleted: ErrLatchDeleted
)

// latchJudge decides an awaiter's reads on the news it heard (latchNews),
// with no Redis of its own.
type latchJudge struct {
	seen  *latchCounts // the news heard by the last read that found the latch set
	doubt time.Time    // the end of the doubt (zero: none): deleted unless an opening is heard first
}

// doubting reports whether a read found the latch gone on a set or delete
// message alone: the next attempts wait for news, they do not read.
func (j *latchJudge) doubting() bool { return !j.doubt.IsZero() }

// judge decides a read that found count n, the news heard by then being now,
// at time at. A latch gone after a set or delete message heard since the last
// read that found it set, with no opening message, starts a doubt of
// latchGrace: settle decides it.
func (j *latchJudge) judge(n int64, now latchCounts, at time.Time) (latchVerdict, time.Duration) {
	switch {
	case n > 0:
		j.seen = &now
		return latchSet, 0
	case j.seen != nil && now.reset != j.seen.reset && now.opened == j.seen.opened:
		j.doubt = at.Add(latchGrace)
		return latchDoubt, latchGrace
	}
	return latchOpened, 0
}

// settle decides a doubt on the news now heard at time at: an opening message
// heard opened the latch (it was that round's); none by the doubt's end, the
// latch was deleted; else the doubt goes on for the time it returns.
func (j *latchJudge) settle(now latchCounts, at time.Time) (latchVerdict, time.Duration) {
	switch {
	case now.opened != j.seen.opened:
		return latchOpened, 0
	case !at.Before(j.doubt):
		return latchDeleted, 0
	}
	return latchDoubt, j.doubt.Sub(at)
}

// latchNews counts the messages one awaiter heard on its latch's channel
// (pubsub.Heard), to tell an opening from a delete.
type latchNews struct {
	opened atomic.Uint64
	reset  atomic.Uint64
}

// latchCounts is what an awaiter had heard when it read the count.
type latchCounts struct{ opened, reset uint64 }

func (n *latchNews) snapshot() latchCounts {
	return latchCounts{opened: n.opened.Load(), reset: n.reset.Load()}
}

// count counts a message of the latch's channel.
func (n *latchNews) count(payload string) {
	switch payload {
	case lua.LatchOpenMessage:
		n.opened.Add(1)
	case lua.LatchResetMessage:
		n.reset.Add(1)
	}
}

// latchWake is the latch channel's wake policy: every message wakes every
// awaiter, to read the count.
func latchWake(string) int { return pubsub.All }
