package identity

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// Keeper keeps one client's record alive: it writes it Delay after it
// starts and every Refresh after that, and deletes it at Stop. Its writes are off every caller's path,
// each bounded by the timeout Keep was given; one that fails is tried again at
// the next refresh, and an ACL that refuses the key is logged once, at Debug.
type Keeper struct {
	ctx    context.Context // ended by Stop: ends a write in flight
	cancel context.CancelFunc
	done   chan struct{}
}

// Keep starts a Keeper of r on rdb; log, if not nil, hears a refused write.
// Each write, and Stop's deletion of the record, takes at most timeout (where
// go-redis applies a ctx's deadline to its sockets; else go-redis's own
// timeouts bound them).
func Keep(rdb redis.Cmdable, r Record, log *slog.Logger, timeout time.Duration) *Keeper {
	ctx, cancel := context.WithCancel(context.Background())
	k := &Keeper{ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go k.run(rdb, r, log, timeout)
	return k
}

// run writes the record until Stop, then deletes it, unless Redis did not
// answer the last write.
func (k *Keeper) run(rdb redis.Cmdable, r Record, log *slog.Logger, timeout time.Duration) {
	defer close(k.done)
	b, _ := json.Marshal(r)
	first := time.NewTimer(Delay)
	defer first.Stop()
	select {
	case <-k.ctx.Done():
		return // nothing written: nothing to delete
	case <-first.C:
	}
	t := time.NewTicker(Refresh)
	defer t.Stop()
	told := false
	for {
		ctx, cancel := context.WithTimeout(k.ctx, timeout)
		err := rdb.Set(ctx, Key(r.Client), b, Life).Err()
		cancel()
		if err != nil && !told && log != nil && isRefusal(err) {
			told = true
			log.Debug("holdfast: the client's record (who holds its locks) was refused", "key", Key(r.Client), "error", err)
		}
		select {
		case <-k.ctx.Done():
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				_ = rdb.Del(ctx, Key(r.Client)).Err()
				cancel()
			}
			return
		case <-t.C:
		}
	}
}

// Stop deletes the record (unless Redis did not answer its last write) and
// waits for the Keeper's goroutine.
func (k *Keeper) Stop() {
	k.cancel()
	<-k.done
}

// isRefusal reports whether err is the server's refusal (an ACL's NOPERM, say),
// not a broken connection.
func isRefusal(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}
