package rlock

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast-go/holdfast/identity"
	"github.com/redis/go-redis/v9"
)

// record keeps the client's identity.Record in Redis from a second after its
// first hold (identity.Delay) until Close: a client that never holds
// anything (one that only reads status, a test's invalid call) writes
// nothing. After the first hold, keep costs an atomic load.
type record struct {
	started atomic.Bool
	mu      sync.Mutex
	keeper  *identity.Keeper
	stopped bool
}

// keep starts the keeper of r on rdb, unless it runs already or the client
// has closed.
func (rc *record) keep(rdb redis.Cmdable, r identity.Record, log *slog.Logger, timeout time.Duration) {
	if rc.started.Load() {
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.keeper == nil && !rc.stopped {
		rc.keeper = identity.Keep(rdb, r, log, timeout)
		rc.started.Store(true)
	}
}

// stop deletes the record, if it was written, and stops its keeper; no
// keeper starts after it.
func (rc *record) stop() {
	rc.mu.Lock()
	k := rc.keeper
	rc.stopped = true
	rc.mu.Unlock()
	if k != nil {
		k.Stop()
	}
}
