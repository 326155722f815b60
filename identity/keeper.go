package identity

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// Keeper keeps one client's record alive: it writes it at once and every
// Refresh, and deletes it at Stop. Its writes are off every caller's path; one
// that fails is tried again at the next refresh, and an ACL that refuses the
// key is logged once, at Debug.
type Keeper struct {
	stop chan struct{}
	done chan struct{}
}

// Keep starts a Keeper of r on rdb; log, if not nil, hears a refused write.
func Keep(rdb redis.Cmdable, r Record, log *slog.Logger) *Keeper {
	k := &Keeper{stop: make(chan struct{}), done: make(chan struct{})}
	go k.run(rdb, r, log)
	return k
}

// run writes the record until Stop, then deletes it.
func (k *Keeper) run(rdb redis.Cmdable, r Record, log *slog.Logger) {
	defer close(k.done)
	b, _ := json.Marshal(r)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-k.stop
		cancel()
	}()
	told := false
	t := time.NewTicker(Refresh)
	defer t.Stop()
	for {
		err := rdb.Set(ctx, Key(r.Client), b, Life).Err()
		if err != nil && !told && log != nil && ctx.Err() == nil && isRefusal(err) {
			told = true
			log.Debug("holdfast: the client's record (who holds its locks) was refused", "key", Key(r.Client), "error", err)
		}
		select {
		case <-k.stop:
			del, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = rdb.Del(del, Key(r.Client)).Err()
			cancel()
			return
		case <-t.C:
		}
	}
}

// Stop deletes the record (a second at most) and waits for the Keeper's goroutines.
func (k *Keeper) Stop() {
	close(k.stop)
	<-k.done
}

// isRefusal reports whether err is the server's refusal (an ACL's NOPERM, say),
// not a broken connection.
func isRefusal(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}
