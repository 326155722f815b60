package watchdog

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Follow is a waiter's interest in a key it does not hold: the key of a
// lock it waits for, of a semaphore whose permits it waits for. The tracker
// reads the key on its tracked connection (which makes the server tell it of
// the key's next change) when the Follow starts and after every change the
// server tells of, and calls News when the read says a waiter may get in:
//   - Count false (a lock's hash, an election's record, a latch): the key is
//     gone, whoever deleted it: an unlock, an operator's DEL, a flush, an
//     eviction, its lease running out, a restart that lost it;
//   - Count true (a semaphore's available permits): the key holds a count
//     above zero, with that count.
//
// A release of this library also publishes on the object's channel: News is
// for the endings that publish nothing. It comes within a round trip of the
// change, from the tracker's goroutine: it must not block.
//
// A key that changes again less than QuietFor after its last change is busy
// (a contended lock, whose releases announce themselves): its read is put
// off by QuietFor, as a read after every change would double the server's
// work. A change that nobody announces, right after another, then reaches the
// waiters at most QuietFor late.
type Follow struct {
	Key   string
	Count bool
	// Queue, if set, is a fair lock's queue (a list of waiters' fields): the
	// read also takes its first element, for News.
	Queue string
	News  func(Read)
}

// Read is what a read of a followed key said that is news.
type Read struct {
	At    time.Time // when the tracker heard of the change (or the Follow started)
	Count int64     // a count's value (Follow.Count)
	Head  string    // the first waiter of Follow.Queue; "" when it is empty
}

// QuietFor is how long a followed key must have been unchanged for the
// tracker to read it at once after a change (Follow).
const QuietFor = 50 * time.Millisecond

// Follow starts following f; stop ends it. Without tracking (Options.Track
// off, a client the tracker cannot follow, a server that refuses tracking)
// nothing is followed, and a waiter's wait is bounded by the lease it read.
func (w *Watchdog) Follow(f *Follow) (stop func()) {
	t := w.trk
	if t == nil {
		return func() {}
	}
	t.mu.Lock()
	t.follows[f.Key] = append(t.follows[f.Key], f)
	t.mark(f.Key, time.Now())
	t.mu.Unlock()
	t.wake()
	return func() {
		t.mu.Lock()
		fs := t.follows[f.Key]
		for i, g := range fs {
			if g == f {
				fs = append(fs[:i], fs[i+1:]...)
				break
			}
		}
		if len(fs) == 0 {
			delete(t.follows, f.Key)
			delete(t.heard, f.Key)
		} else {
			t.follows[f.Key] = fs
		}
		t.mu.Unlock()
	}
}

// followed marks the followed keys among keys (every one when keys is nil:
// a flush, a broken connection) to be read: at once, or after QuietFor when
// the key changed less than QuietFor before. t.mu is held.
func (t *tracker) followed(keys []string) {
	now := time.Now()
	if keys == nil {
		for k := range t.follows {
			t.mark(k, now)
		}
		return
	}
	for _, k := range keys {
		if _, ok := t.follows[k]; !ok {
			continue
		}
		prev := t.heard[k]
		t.heard[k] = now
		if now.Sub(prev) < QuietFor {
			t.putOff(k, now, QuietFor)
		} else {
			t.mark(k, now)
		}
	}
}

// mark records that key is to be read for news heard at at, unless it is
// already, for earlier news. t.mu is held.
func (t *tracker) mark(key string, at time.Time) {
	if _, ok := t.unread[key]; !ok {
		t.unread[key] = at
	}
}

// unread is a followed key to read: whether it is a count, its queue, and
// when its news came.
type unread struct {
	count bool
	queue string
	at    time.Time
}

// takeUnread takes the followed keys to read.
func (t *tracker) takeUnread() map[string]unread {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.unread) == 0 {
		return nil
	}
	out := make(map[string]unread, len(t.unread))
	for k, at := range t.unread {
		if fs := t.follows[k]; len(fs) > 0 {
			out[k] = unread{count: fs[0].Count, queue: fs[0].Queue, at: at}
		}
	}
	clear(t.unread)
	return out
}

// putOff marks key to be read after d, for news heard at at, unless a read of
// it is put off already. t.mu is held.
func (t *tracker) putOff(key string, at time.Time, d time.Duration) {
	if _, ok := t.later[key]; ok {
		return
	}
	t.later[key] = at
	time.AfterFunc(d, func() {
		t.mu.Lock()
		if at, ok := t.later[key]; ok {
			delete(t.later, key)
			t.mark(key, at)
		}
		t.mu.Unlock()
		t.wake()
	})
}

// readFollowed reads keys, node by node, on the tracked connections, and
// tells the news. A read that did not reach its node is tried again after
// retryPause.
func (t *tracker) readFollowed(keys map[string]unread) {
	ctx, cancel := context.WithTimeout(t.w.ctx, t.w.opts.Interval)
	defer cancel()
	byNode := make(map[*node][]string)
	for k := range keys {
		if n, err := t.nodeOf(ctx, k); err == nil && n.mode.Load() != modeRefused {
			byNode[n] = append(byNode[n], k)
		}
	}
	for n, ks := range byNode {
		if err := t.readNode(ctx, n, ks, keys); err != nil && t.w.ctx.Err() == nil {
			time.AfterFunc(retryPause, func() {
				t.mu.Lock()
				for _, k := range ks {
					t.mark(k, keys[k].at)
				}
				t.mu.Unlock()
				t.wake()
			})
		}
	}
}

// readNode reads ks on n in one pipelined round trip (EXISTS, or GET for a
// count; reads the server tracks) and tells the news of each.
func (t *tracker) readNode(ctx context.Context, n *node, ks []string, keys map[string]unread) error {
	pipe := n.reader.Pipeline()
	cmds := make([]redis.Cmder, len(ks))
	heads := make([]*redis.StringCmd, len(ks))
	for i, k := range ks {
		if keys[k].count {
			cmds[i] = pipe.Get(ctx, k)
		} else {
			cmds[i] = pipe.Exists(ctx, k)
		}
		if q := keys[k].queue; q != "" {
			heads[i] = pipe.LIndex(ctx, q, 0)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) && !refused(err) {
		return err
	}
	for i, k := range ks {
		if v, ok := newsOf(cmds[i]); ok {
			r := Read{At: keys[k].at, Count: v}
			if heads[i] != nil {
				r.Head = heads[i].Val()
			}
			t.tell(k, r)
		}
	}
	return nil
}

// newsOf says whether a read of a followed key is news, and its count.
func newsOf(cmd redis.Cmder) (int64, bool) {
	switch c := cmd.(type) {
	case *redis.IntCmd:
		return 0, c.Err() == nil && c.Val() == 0
	case *redis.StringCmd:
		v, err := strconv.ParseInt(c.Val(), 10, 64)
		return v, c.Err() == nil && err == nil && v > 0
	}
	return 0, false
}

// tell calls the News of every Follow of key.
func (t *tracker) tell(key string, r Read) {
	t.mu.Lock()
	fs := append([]*Follow(nil), t.follows[key]...)
	t.mu.Unlock()
	for _, f := range fs {
		f.News(r)
	}
}
