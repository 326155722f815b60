package lua

import (
	"context"
	_ "embed"
	"time"
)

var (
	//go:embed sem_acquire.lua
	semAcquireSrc string
	//go:embed sem_release.lua
	semReleaseSrc string
	//go:embed sem_set.lua
	semSetSrc string
	//go:embed sem_add.lua
	semAddSrc string
	//go:embed sem_drain.lua
	semDrainSrc string

	semAcquire = syncScript(semAcquireSrc)
	semRelease = syncScript(semReleaseSrc)
	semSet     = syncScript(semSetSrc)
	semAdd     = syncScript(semAddSrc)
	semDrain   = syncScript(semDrainSrc)
)

// The outcomes of SemaphoreAcquire.
const (
	SemaphoreAbsent   int64 = -1 // the semaphore does not exist: nothing changed
	SemaphoreShort    int64 = 0  // it holds fewer permits than asked: nothing changed
	SemaphoreAcquired int64 = 1  // the permits were taken
)

// SemaphoreAcquire takes n permits of the semaphore name (RSemaphore
// tryAcquire, protocol §2.11) in one round trip and says how it went:
// SemaphoreAcquired, SemaphoreShort or SemaphoreAbsent. Nothing is published.
func SemaphoreAcquire(ctx context.Context, rdb Processor, name string, n int64, req Request) (int64, error) {
	return evalInt(ctx, rdb, semAcquire, []string{name, req.Key}, n, req.TTL.arg())
}

// SemaphoreRelease adds n permits to the semaphore name and publishes the new
// count on its channel (RSemaphore release); with ifExists, only when the
// semaphore exists (releaseIfExists), reporting whether it did. publish is
// Publish or ShardedPublish.
func SemaphoreRelease(ctx context.Context, rdb Processor, name string, n int64, ifExists bool, publish string, req Request) (bool, error) {
	v, err := evalInt(ctx, rdb, semRelease, []string{name, SemaphoreChannel(name), req.Key},
		n, publish, req.TTL.arg(), flag(ifExists))
	return v == 1, err
}

// SemaphoreTrySet sets the permits of the semaphore name to n and publishes n,
// only if it does not exist (trySetPermits of RSemaphore and of
// RPermitExpirableSemaphore): true when it did. A positive ttl gives the key
// that time to live.
func SemaphoreTrySet(ctx context.Context, rdb Processor, name string, n int64, ttl time.Duration, publish string, req Request) (bool, error) {
	var px any = "0"
	if ttl > 0 {
		px = millis(ttl)
	}
	v, err := evalInt(ctx, rdb, semSet, []string{name, SemaphoreChannel(name), req.Key},
		n, publish, req.TTL.arg(), px)
	return v == 1, err
}

// Publishing rules of SemaphoreAdd.
const (
	PublishTotal = "total" // RSemaphore: the new count, whatever its sign
	PublishDelta = "delta" // RPermitExpirableSemaphore: the delta, when positive
)

// SemaphoreAdd adds delta (any sign) to the permits of the semaphore name with
// SET, which drops the key's time to live (addPermits), and publishes by rule
// (PublishTotal or PublishDelta).
func SemaphoreAdd(ctx context.Context, rdb Processor, name string, delta int64, rule, publish string, req Request) error {
	_, err := evalInt(ctx, rdb, semAdd, []string{name, SemaphoreChannel(name), req.Key},
		delta, publish, req.TTL.arg(), rule)
	return err
}

// SemaphoreDrain sets the permits of the semaphore name to 0 and returns what
// it held (drainPermits); 0 when it does not exist. Nothing is published.
func SemaphoreDrain(ctx context.Context, rdb Processor, name string, req Request) (int64, error) {
	return evalInt(ctx, rdb, semDrain, []string{name, req.Key}, req.TTL.arg())
}
