package main

import (
	"context"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/libs"
	"github.com/holdfast-go/holdfast/bench/internal/report"
	"github.com/holdfast-go/holdfast/bench/internal/stats"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis/rueidislock"
)

// detected is one scenario's detection times, per library.
type detected struct {
	others   int
	holdfast stats.Dist
	rueidis  stats.Dist
}

// holder is one library's side of the detection rounds: hold takes the lock
// name and returns the Redis key that holds it and a channel closed when the
// holder learns it is gone; others holds n other locks for the whole
// scenario.
type holder interface {
	hold(ctx context.Context, name string) (key string, lost <-chan struct{}, err error)
	others(ctx context.Context, n int) error
	close()
}

// detection runs o.deletions deletions per library, in turns, with others other
// holds of the same client open.
func detection(ctx context.Context, addr string, admin *redis.Client, others int, o options) (detected, error) {
	hf, err := newHoldfastHolder(addr)
	if err != nil {
		return detected{}, err
	}
	defer hf.close()
	ru, err := newRueidisHolder(addr)
	if err != nil {
		return detected{}, err
	}
	defer ru.close()
	for _, h := range []holder{hf, ru} {
		if err := h.others(ctx, others); err != nil {
			return detected{}, err
		}
	}
	var hfs, rus []int64
	for i := range o.deletions {
		name := fmt.Sprintf("loss:%d:%d", others, i)
		for _, side := range []struct {
			h   holder
			out *[]int64
		}{{hf, &hfs}, {ru, &rus}} {
			d, err := deleteAndWait(ctx, side.h, admin, name, o.settle)
			if err != nil {
				return detected{}, err
			}
			*side.out = append(*side.out, int64(d))
		}
	}
	return detected{others: others, holdfast: stats.NewDist(hfs), rueidis: stats.NewDist(rus)}, nil
}

// deleteAndWait takes name with h, holds it for settle (the holder has
// looked at it, as a lock held while work runs has), deletes its key from
// another client and returns how long the holder took to learn it, from the
// DEL's send.
func deleteAndWait(ctx context.Context, h holder, admin *redis.Client, name string, settle time.Duration) (time.Duration, error) {
	key, lost, err := h.hold(ctx, name)
	if err != nil {
		return 0, err
	}
	time.Sleep(settle) // not a synchronisation: the hold's age before its deletion
	start := time.Now()
	if err := admin.Del(ctx, key).Err(); err != nil {
		return 0, err
	}
	select {
	case <-lost:
		return time.Since(start), nil
	case <-time.After(30 * time.Second):
		return 0, fmt.Errorf("%s: %w", key, errNotLost)
	}
}

// holdfastHolder holds holdfast Mutexes, tracking on (the default).
type holdfastHolder struct {
	rdb *redis.Client
	c   *rlock.Client
}

func newHoldfastHolder(addr string) (*holdfastHolder, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c, err := rlock.New(rdb)
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	return &holdfastHolder{rdb: rdb, c: c}, nil
}

func (h *holdfastHolder) hold(ctx context.Context, name string) (string, <-chan struct{}, error) {
	l, err := h.c.NewMutex("hf:" + name).Lock(rlock.WithOwner(ctx))
	if err != nil {
		return "", nil, err
	}
	return "hf:" + name, l.Done(), nil
}

func (h *holdfastHolder) others(ctx context.Context, n int) error {
	for i := range n {
		if _, err := h.c.NewMutex(fmt.Sprintf("hf:other:%d", i)).Lock(rlock.WithOwner(ctx)); err != nil {
			return err
		}
	}
	return nil
}

func (h *holdfastHolder) close() { _ = h.c.Close(); _ = h.rdb.Close() }

// rueidisHolder holds rueidislock locks with its README's single-Redis
// settings (KeyMajority 1, NoLoopTracking), as bench/internal/libs does.
type rueidisHolder struct {
	l       rueidislock.Locker
	cancels []context.CancelFunc
}

func newRueidisHolder(addr string) (*rueidisHolder, error) {
	l, _, err := libs.NewRueidisLocker(addr)
	if err != nil {
		return nil, err
	}
	return &rueidisHolder{l: l}, nil
}

func (h *rueidisHolder) hold(ctx context.Context, name string) (string, <-chan struct{}, error) {
	lctx, cancel, err := h.l.WithContext(ctx, "ru:"+name)
	if err != nil {
		return "", nil, err
	}
	h.cancels = append(h.cancels, cancel)
	return "rueidislock:0:ru:" + name, lctx.Done(), nil // KeyPrefix:i:name, i < 2*KeyMajority-1
}

func (h *rueidisHolder) others(ctx context.Context, n int) error {
	for i := range n {
		_, cancel, err := h.l.WithContext(ctx, fmt.Sprintf("ru:other:%d", i))
		if err != nil {
			return err
		}
		h.cancels = append(h.cancels, cancel)
	}
	return nil
}

func (h *rueidisHolder) close() {
	for _, c := range h.cancels {
		c()
	}
	h.l.Close()
}

// detectionTable renders the detection times.
func detectionTable(ds []detected, o options) string {
	var b report.MD
	b.P("\n## From an outside DEL to the holder's knowing\n\n"+
		"Each round takes a lock, holds it %v, deletes its key with `DEL` from another client and "+
		"times, from the DEL's send, until holdfast's `Lease.Done()` is closed (default client: "+
		"tracking on, watchdog 30 s, so the first renewal is 10 s away) or rueidislock's "+
		"`WithContext` context is cancelled (KeyMajority 1, NoLoopTracking, defaults otherwise: "+
		"client-side caching). The libraries take turns, round by round; %d rounds each. "+
		"\"Busy\": the same client holds %d other locks meanwhile.\n\n", o.settle, o.deletions, o.others)
	b.WriteString("| scenario | library | rounds | p50 | p99 | max |\n| --- | --- | ---: | ---: | ---: | ---: |\n")
	for _, d := range ds {
		sc := "idle"
		if d.others > 0 {
			sc = fmt.Sprintf("busy (%d other holds)", d.others)
		}
		for _, row := range []struct {
			name string
			d    stats.Dist
		}{{"holdfast", d.holdfast}, {"rueidislock", d.rueidis}} {
			s := row.d.Summary()
			b.P("| %s | %s | %d | %s | %s | %s |\n", sc, row.name, s.N,
				report.Duration(s.P50), report.Duration(s.P99), report.Duration(s.Max))
		}
	}
	return b.String()
}
