package watchdog

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
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
	t.fol.add(f)
	t.wake()
	return func() { t.fol.remove(f) }
}

// follows are the waiters' keys the tracker follows, and which of them to
// read, under a mutex of their own.
type follows struct {
	clock clock
	wake  func() // pokes the checker: keys to read

	mu     sync.Mutex
	by     map[string][]*Follow // by key
	unread map[string]time.Time // followed keys to read (new, or changed), by when the news came
	later  map[string]time.Time // followed keys whose read is put off (busy keys), likewise
	heard  map[string]time.Time // when each followed key last changed
}

// newFollows returns an empty set of follows, keeping time with clk, whose
// keys to read wake the checker.
func newFollows(clk clock, wake func()) *follows {
	return &follows{clock: clk, wake: wake, by: make(map[string][]*Follow),
		unread: make(map[string]time.Time), later: make(map[string]time.Time), heard: make(map[string]time.Time)}
}

// add follows f, whose key is to be read now.
func (fs *follows) add(f *Follow) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.by[f.Key] = append(fs.by[f.Key], f)
	fs.mark(f.Key, fs.clock.now())
}

// remove stops following f.
func (fs *follows) remove(f *Follow) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	left := slices.DeleteFunc(fs.by[f.Key], func(g *Follow) bool { return g == f })
	if len(left) == 0 {
		delete(fs.by, f.Key)
		delete(fs.heard, f.Key)
	} else {
		fs.by[f.Key] = left
	}
}

// changed marks the followed keys among keys (every one when keys is nil:
// a flush, a broken connection) to be read: at once, or after QuietFor when
// the key changed less than QuietFor before.
func (fs *follows) changed(keys []string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	now := fs.clock.now()
	if keys == nil {
		for k := range fs.by {
			fs.mark(k, now)
		}
		return
	}
	for _, k := range keys {
		if _, ok := fs.by[k]; !ok {
			continue
		}
		prev := fs.heard[k]
		fs.heard[k] = now
		if now.Sub(prev) < QuietFor {
			fs.putOff(k, now, QuietFor)
		} else {
			fs.mark(k, now)
		}
	}
}

// mark records that key is to be read for news heard at at, unless it is
// already, for earlier news. fs.mu is held.
func (fs *follows) mark(key string, at time.Time) {
	if _, ok := fs.unread[key]; !ok {
		fs.unread[key] = at
	}
}

// unread is a followed key to read: whether it is a count, its queue, and
// when its news came.
type unread struct {
	count bool
	queue string
	at    time.Time
}

// take takes the followed keys to read.
func (fs *follows) take() map[string]unread {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if len(fs.unread) == 0 {
		return nil
	}
	out := make(map[string]unread, len(fs.unread))
	for k, at := range fs.unread {
		if f := fs.by[k]; len(f) > 0 {
			out[k] = unread{count: f[0].Count, queue: f[0].Queue, at: at}
		}
	}
	clear(fs.unread)
	return out
}

// putOff marks key to be read after d, for news heard at at, unless a read of
// it is put off already. fs.mu is held.
func (fs *follows) putOff(key string, at time.Time, d time.Duration) {
	if _, ok := fs.later[key]; ok {
		return
	}
	fs.later[key] = at
	fs.clock.afterFunc(d, func() {
		fs.mu.Lock()
		if at, ok := fs.later[key]; ok {
			delete(fs.later, key)
			fs.mark(key, at)
		}
		fs.mu.Unlock()
		fs.wake()
	})
}

// retry marks ks, whose read did not reach their node, to be read again after
// retryPause.
func (fs *follows) retry(ks []string, keys map[string]unread) {
	fs.clock.afterFunc(retryPause, func() {
		fs.mu.Lock()
		for _, k := range ks {
			fs.mark(k, keys[k].at)
		}
		fs.mu.Unlock()
		fs.wake()
	})
}

// tell calls the News of every Follow of key.
func (fs *follows) tell(key string, r Read) {
	fs.mu.Lock()
	f := slices.Clone(fs.by[key])
	fs.mu.Unlock()
	for _, f := range f {
		f.News(r)
	}
}

// readFollowed reads keys, node by node, on the tracked connections, and
// tells the news. A read that did not reach its node is tried again after
// retryPause.
func (t *tracker) readFollowed(keys map[string]unread) {
	ctx, cancel := context.WithTimeout(t.w.ctx, t.w.opts.Interval)
	defer cancel()
	byNode := make(map[server][]string)
	for k := range keys {
		if s, err := t.nodes.of(ctx, k); err == nil && s.tracks() {
			byNode[s] = append(byNode[s], k)
		}
	}
	for s, ks := range byNode {
		news, err := s.read(ctx, ks, keys)
		if err != nil {
			if t.w.ctx.Err() == nil {
				t.fol.retry(ks, keys)
			}
			continue
		}
		for k, r := range news {
			t.fol.tell(k, r)
		}
	}
}

// read reads ks on n in one pipelined round trip (EXISTS, or GET for a
// count; reads the server tracks) and returns the news of each (server).
func (n *node) read(ctx context.Context, ks []string, keys map[string]unread) (map[string]Read, error) {
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
		return nil, err
	}
	news := make(map[string]Read)
	for i, k := range ks {
		if v, ok := newsOf(cmds[i]); ok {
			r := Read{At: keys[k].at, Count: v}
			if heads[i] != nil {
				r.Head = heads[i].Val()
			}
			news[k] = r
		}
	}
	return news, nil
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
