package lua

import (
	"context"
	_ "embed"
	"time"

	"github.com/redis/go-redis/v9"
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

	semAcquire = syncScript("sem_acquire", semAcquireSrc)
	semRelease = syncScript("sem_release", semReleaseSrc)
	semSet     = syncScript("sem_set", semSetSrc)
	semAdd     = syncScript("sem_add", semAddSrc)
	semDrain   = syncScript("sem_drain", semDrainSrc)
)

// SemaphoreAbsent is what SemaphoreAcquire serves when the semaphore does not
// exist: nothing changed.
const SemaphoreAbsent int64 = -1

// SemaphoreAcquire takes permits of the semaphore name (RSemaphore
// tryAcquire, protocol §2.11) in one round trip for waiters of one client, in
// the order of wants (their counts; the caller's first), while the permits
// cover the next one, and returns how many waiters it served: 0 when the
// semaphore holds fewer than wants[0], SemaphoreAbsent when it does not exist.
// Nothing is published.
func SemaphoreAcquire(ctx context.Context, rdb Processor, name string, req Request, wants ...int64) (int64, error) {
	served, _, err := SemaphoreAcquireAcked(ctx, rdb, name, req, Acks{}, wants...)
	return served, err
}

// SemaphoreAcquireAcked is SemaphoreAcquire followed, when acks asks for
// replicas, by WAIT in the same round trip on the semaphore's primary (with
// the PEXPIRE of callRecorded between them); it also returns how many replicas
// acknowledged.
func SemaphoreAcquireAcked(ctx context.Context, rdb Processor, name string, req Request, acks Acks, wants ...int64) (served int64, acked int, err error) {
	args := make([]any, 0, 1+len(wants))
	args = append(args, req.TTL.arg())
	for _, n := range wants {
		args = append(args, n)
	}
	return evalIntAcked(ctx, rdb, semAcquire, acks, req, []string{name, req.Key}, args...)
}

// SemaphoreRelease adds n permits to the semaphore name, hands them to waiters
// of the releasing client whose counts are wants (in order, while the permits
// cover the next one; when onlyIfAlone, only if no other client listens on the
// channel) and publishes the count left on its channel (RSemaphore release);
// with ifExists, only when the semaphore exists (releaseIfExists). It returns
// whether the permits were released and how many waiters were served. publish
// is Publish or ShardedPublish.
func SemaphoreRelease(ctx context.Context, rdb Processor, name string, n int64, ifExists bool, publish string, req Request,
	onlyIfAlone bool, wants ...int64) (released bool, served int64, err error) {
	released, served, _, err = SemaphoreReleaseAcked(ctx, rdb, name, n, ifExists, publish, req, Acks{}, onlyIfAlone, wants...)
	return released, served, err
}

// SemaphoreReleaseAcked is SemaphoreRelease followed, when acks asks for
// replicas, by WAIT in the same round trip (see SemaphoreAcquireAcked); it
// also returns how many replicas acknowledged.
func SemaphoreReleaseAcked(ctx context.Context, rdb Processor, name string, n int64, ifExists bool, publish string, req Request,
	acks Acks, onlyIfAlone bool, wants ...int64) (released bool, served int64, acked int, err error) {
	args := make([]any, 0, 5+len(wants))
	args = append(args, n, publish, req.TTL.arg(), flag(ifExists), flag(onlyIfAlone))
	for _, w := range wants {
		args = append(args, w)
	}
	v, acked, err := evalIntAcked(ctx, rdb, semRelease, acks, req, []string{name, SemaphoreChannel(name), req.Key}, args...)
	return v >= 1, max(v-1, 0), acked, err
}

// Recorded reads what the call req recorded, if it ran and its record has
// not expired: what a caller whose round trip failed reads to learn its
// outcome. If req has not run, Recorded records that it never will: a record
// of 0, which an execution of req that comes later (its command was on a
// connection the server reads after this one) answers as its own, changing
// nothing. So the outcome Recorded reads is final. SET NX and GET run in one
// MULTI.
func Recorded(ctx context.Context, rdb redis.Cmdable, req Request) (v int64, ran bool, err error) {
	ttl := req.TTL.Duration()
	if ttl <= 0 {
		ttl = time.Minute // a record never outlives its use for ever
	}
	var claim *redis.BoolCmd
	var read *redis.StringCmd
	_, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		claim = p.SetNX(ctx, req.Key, 0, ttl)
		read = p.Get(ctx, req.Key)
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	if claim.Val() {
		return 0, false, nil // it had not run: now it never will
	}
	v, err = read.Int64()
	return v, err == nil, err
}

// SemaphoreTrySet sets the permits of the semaphore name to n and publishes n,
// only if it does not exist (trySetPermits of RSemaphore and of
// RPermitExpirableSemaphore): true when it did. A positive ttl gives the key
// that time to live.
func SemaphoreTrySet(ctx context.Context, rdb Processor, name string, n int64, ttl time.Duration, publish string, req Request) (bool, error) {
	ok, _, err := SemaphoreTrySetAcked(ctx, rdb, name, n, ttl, publish, req, Acks{})
	return ok, err
}

// SemaphoreTrySetAcked is SemaphoreTrySet followed, when acks asks for
// replicas, by WAIT in the same round trip (see SemaphoreAcquireAcked); it
// also returns how many replicas acknowledged.
func SemaphoreTrySetAcked(ctx context.Context, rdb Processor, name string, n int64, ttl time.Duration, publish string, req Request, acks Acks) (bool, int, error) {
	var px any = "0"
	if ttl > 0 {
		px = millis(ttl)
	}
	v, acked, err := evalIntAcked(ctx, rdb, semSet, acks, req, []string{name, SemaphoreChannel(name), req.Key},
		n, publish, req.TTL.arg(), px)
	return v == 1, acked, err
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
	_, err := SemaphoreAddAcked(ctx, rdb, name, delta, rule, publish, req, Acks{})
	return err
}

// SemaphoreAddAcked is SemaphoreAdd followed, when acks asks for replicas, by
// WAIT in the same round trip (see SemaphoreAcquireAcked); it returns how many
// replicas acknowledged.
func SemaphoreAddAcked(ctx context.Context, rdb Processor, name string, delta int64, rule, publish string, req Request, acks Acks) (int, error) {
	_, acked, err := evalIntAcked(ctx, rdb, semAdd, acks, req, []string{name, SemaphoreChannel(name), req.Key},
		delta, publish, req.TTL.arg(), rule)
	return acked, err
}

// SemaphoreDrain sets the permits of the semaphore name to 0 and returns what
// it held (drainPermits); 0 when it does not exist. Nothing is published.
func SemaphoreDrain(ctx context.Context, rdb Processor, name string, req Request) (int64, error) {
	n, _, err := SemaphoreDrainAcked(ctx, rdb, name, req, Acks{})
	return n, err
}

// SemaphoreDrainAcked is SemaphoreDrain followed, when acks asks for
// replicas, by WAIT in the same round trip (see SemaphoreAcquireAcked); it
// also returns how many replicas acknowledged.
func SemaphoreDrainAcked(ctx context.Context, rdb Processor, name string, req Request, acks Acks) (int64, int, error) {
	return evalIntAcked(ctx, rdb, semDrain, acks, req, []string{name, req.Key}, req.TTL.arg())
}
