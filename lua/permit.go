package lua

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed permit_acquire.lua
	permitAcquireSrc string
	//go:embed permit_release.lua
	permitReleaseSrc string
	//go:embed permit_release_all.lua
	permitReleaseAllSrc string
	//go:embed permit_count.lua
	permitCountSrc string
	//go:embed permit_total.lua
	permitTotalSrc string
	//go:embed permit_lease.lua
	permitLeaseSrc string

	permitAcquire    = syncScript("permit_acquire", permitAcquireSrc)
	permitRelease    = syncScript("permit_release", permitReleaseSrc)
	permitReleaseAll = syncScript("permit_release_all", permitReleaseAllSrc)
	permitCount      = syncScript("permit_count", permitCountSrc)
	permitTotal      = syncScript("permit_total", permitTotalSrc)
	permitLease      = syncScript("permit_lease", permitLeaseSrc)
)

// NoExpiry is the expiry Redisson stores for a permit without a lease
// (protocol §1.9): 922337203685477, sent and compared as that exact text.
const NoExpiry int64 = 922337203685477

// NewPermitID returns a new permit id: 16 random bytes, as a string of raw
// bytes (the zset member; Redisson ≥ 3.17.0 shows it as 32 hex digits).
func NewPermitID() string {
	id := randomID()
	return string(id[:])
}

// Permit is a permit-expirable semaphore (RPermitExpirableSemaphore): its
// available count N, its permits' zset and its channel.
type Permit struct {
	keys  []string
	boxed []any // keys, boxed once for the hot path's calls (see args)
}

// NewPermit returns the permit-expirable semaphore name.
func NewPermit(name string) Permit {
	keys := []string{name, PermitTimeoutsName(name), SemaphoreChannel(name)}
	return Permit{keys: keys, boxed: []any{keys[0], keys[1], keys[2]}}
}

// Channel returns the semaphore's channel (SemaphoreChannel).
func (p Permit) Channel() string { return p.keys[2] }

// Renewal returns what renews the permit id (raw) of the semaphore
// (PermitRenewal).
func (p Permit) Renewal(id string) Renewal {
	return Renewal{Kind: RenewPermit, Key: p.keys[1], Member: id}
}

// args returns the head of a script's arguments on p (see script.run): the
// placeholders, the key count, p's keys and then more keys, with room for n
// arguments more. It is the only slice of the call's arguments.
func (p Permit) args(n int, more ...string) []any {
	args := make([]any, 3, 3+len(p.boxed)+len(more)+n)
	args[2] = len(p.boxed) + len(more)
	args = append(args, p.boxed...)
	for _, k := range more {
		args = append(args, k)
	}
	return args
}

// PermitTry is what an acquisition attempt read.
type PermitTry struct {
	// Served is the number of waiters served, from the first: 0 when the
	// first did not get its permits.
	Served int
	// Expiry, when the first waiter was served, is the expiry Redis holds for
	// its ids (epoch ms, the writer's clock): the one sent, or for a second
	// execution that found them still live, the first execution's.
	Expiry int64
	// NextExpiry, when none was served, is the earliest expiry of a permit
	// with a lease (epoch ms, the writer's clock): the semaphore may have
	// permits to give then, with no message. 0: no permit has a lease.
	NextExpiry int64
	// Absent, when none was served, says the semaphore does not exist.
	Absent bool
}

// PermitWaiter is a waiter an acquisition or a release serves: its permits'
// ids (raw, NewPermitID) and their expiry (epoch ms, or NoExpiry).
type PermitWaiter struct {
	IDs    []string
	Expiry int64
}

// appendWaiters appends the script arguments of ws (sync.lua's serve).
func appendWaiters(args []any, ws []PermitWaiter) []any {
	for _, w := range ws {
		args = append(args, len(w.IDs), w.Expiry)
		for _, id := range w.IDs {
			args = append(args, id)
		}
	}
	return args
}

// waiterArgs counts the arguments of ws.
func waiterArgs(ws []PermitWaiter) int {
	n := 0
	for _, w := range ws {
		n += 2 + len(w.IDs)
	}
	return n
}

// Acquire takes permits for the waiters ws, the caller first, in their order
// while the permits cover the next one, after reclaiming up to the first
// one's count of expired permits (Redisson's tryAcquire). now is the
// caller's clock in epoch ms. A second execution with the first waiter's ids
// answers it served, with the expiry the first one set, only while that
// expiry is after now and after the server's clock; ids of an earlier
// execution that expired are acquired afresh, never granted as they are.
func (p Permit) Acquire(ctx context.Context, rdb Processor, now int64, publish string, ws ...PermitWaiter) (PermitTry, error) {
	try, _, _, err := p.AcquireAcked(ctx, rdb, now, publish, Acks{}, ws...)
	return try, err
}

// AcquireAcked is Acquire followed, when acks asks for replicas, by WAIT in
// the same round trip on the semaphore's primary; it also returns how many
// replicas acknowledged, and whether the first waiter was served from its
// ids found live in the zset (replayed: a second execution of the same
// acquisition, which wrote nothing, so that the WAIT counted nothing of the
// first execution's writes: Confirm its acknowledgement).
func (p Permit) AcquireAcked(ctx context.Context, rdb Processor, now int64, publish string, acks Acks,
	ws ...PermitWaiter) (try PermitTry, replayed bool, acked int, err error) {
	args := append(p.args(2+waiterArgs(ws)), now, publish)
	v, acked, err := permitAcquire.call(ctx, rdb, appendWaiters(args, ws), acks)
	if errors.Is(err, redis.Nil) {
		return PermitTry{}, false, acked, nil
	}
	if err != nil {
		return PermitTry{}, false, 0, err
	}
	if n, ok := v.(int64); ok && len(ws) > 0 {
		return PermitTry{Served: int(n), Expiry: ws[0].Expiry}, false, acked, nil
	}
	s, _ := v.(string)
	if held, ok := scoreAfter(s, "="); ok {
		return PermitTry{Served: 1, Expiry: held}, true, acked, nil
	}
	if next, ok := scoreAfter(s, ":"); ok {
		return PermitTry{NextExpiry: next}, false, acked, nil
	}
	if s == "absent" {
		return PermitTry{Absent: true}, false, acked, nil
	}
	return PermitTry{}, false, 0, fmt.Errorf("lua: unexpected acquire reply %v", v)
}

// scoreAfter reads the zset score (epoch ms) that follows prefix in s.
func scoreAfter(s, prefix string) (int64, bool) {
	ms, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(ms, 64)
	return int64(v), err == nil
}

// The outcomes of Permit.Release for one id.
const (
	PermitUnknown  = -1 // the zset does not have the id
	PermitExpired  = 0  // the id had expired: removed and returned to the pool all the same
	PermitReleased = 1  // a live permit, returned to the pool
)

// Release gives back the permit id (Redisson's tryRelease(id), no reclaim),
// serves the waiters ws of the releasing client from it (when onlyIfAlone,
// only if no other client listens on the channel), and publishes the
// available count left; it returns PermitUnknown, PermitExpired or
// PermitReleased, and the number of waiters served.
func (p Permit) Release(ctx context.Context, rdb Processor, id string, now int64, publish string, req Request,
	onlyIfAlone bool, ws ...PermitWaiter) (int64, int, error) {
	outcome, served, _, err := p.ReleaseAcked(ctx, rdb, id, now, publish, req, Acks{}, onlyIfAlone, ws...)
	return outcome, served, err
}

// ReleaseAcked is Release followed, when acks asks for replicas, by WAIT in
// the same round trip (with the PEXPIRE of callRecorded between them); it
// also returns how many replicas acknowledged.
func (p Permit) ReleaseAcked(ctx context.Context, rdb Processor, id string, now int64, publish string, req Request,
	acks Acks, onlyIfAlone bool, ws ...PermitWaiter) (outcome int64, served, acked int, err error) {
	args := append(p.args(5+waiterArgs(ws), req.Key), id, now, publish, req.TTL.arg(), flag(onlyIfAlone))
	v, acked, err := asIntAcked(permitRelease.callRecorded(ctx, rdb, appendWaiters(args, ws), acks, req))
	if err != nil || v < PermitUnknown {
		return 0, 0, 0, errOrBadReply(err, v)
	}
	k := (v + 1) / 4 // v = outcome + 4 × served, outcome in -1..1
	return v - 4*k, int(k), acked, nil
}

// ReleaseAll gives back every id or none (Redisson's tryRelease(ids) since
// 3.41.0): 0 when one is unknown or expired, else how many were removed,
// after reclaiming every expired permit; it serves the waiters ws as Release
// does and publishes the number left to the pool.
func (p Permit) ReleaseAll(ctx context.Context, rdb Processor, ids []string, now int64, publish string, req Request,
	onlyIfAlone bool, ws ...PermitWaiter) (int64, int, error) {
	r, served, _, err := p.ReleaseAllAcked(ctx, rdb, ids, now, publish, req, Acks{}, onlyIfAlone, ws...)
	return r, served, err
}

// ReleaseAllAcked is ReleaseAll followed, when acks asks for replicas, by
// WAIT in the same round trip (see ReleaseAcked); it also returns how many
// replicas acknowledged.
func (p Permit) ReleaseAllAcked(ctx context.Context, rdb Processor, ids []string, now int64, publish string, req Request,
	acks Acks, onlyIfAlone bool, ws ...PermitWaiter) (released int64, served, acked int, err error) {
	args := append(p.args(5+len(ids)+waiterArgs(ws), req.Key), now, publish, req.TTL.arg(), len(ids), flag(onlyIfAlone))
	for _, id := range ids {
		args = append(args, id)
	}
	v, acked, err := asIntAcked(permitReleaseAll.callRecorded(ctx, rdb, appendWaiters(args, ws), acks, req))
	if err != nil || v < 0 {
		return 0, 0, 0, errOrBadReply(err, v)
	}
	k := int64(len(ids)) + 1 // v = r + k × served, r in 0..len(ids)
	return v % k, int(v / k), acked, nil
}

// errOrBadReply is err, or the error of a reply v no script gives.
func errOrBadReply(err error, v int64) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("lua: unexpected release reply %d", v)
}

// What Permit.Count reads.
const (
	CountAvailable = "available" // the available count
	CountAcquired  = "acquired"  // the acquired permits
	CountTotal     = "total"     // both; 0 when the count's key is absent
)

// Count reads one of the counts (CountAvailable, CountAcquired, CountTotal)
// after reclaiming every expired permit.
func (p Permit) Count(ctx context.Context, rdb Processor, what string, now int64, publish string) (int64, error) {
	return evalInt(ctx, rdb, permitCount, p.keys, now, publish, what)
}

// SetTotal makes available plus acquired equal n (Redisson's setPermits).
func (p Permit) SetTotal(ctx context.Context, rdb Processor, n int64, publish string) error {
	_, err := evalInt(ctx, rdb, permitTotal, p.keys, n, publish)
	return err
}

// SetTotalAcked is SetTotal followed, when acks asks for replicas, by WAIT in
// the same round trip on the semaphore's primary, and returns how many
// replicas acknowledged. The script records no request, and a second
// execution that finds the total right writes nothing: a SET of req's key (a
// record of holdfast's own, expiring after req.TTL) goes between the two, so
// that the WAIT always covers the first execution's writes.
func (p Permit) SetTotalAcked(ctx context.Context, rdb Processor, n int64, publish string, req Request, acks Acks) (int, error) {
	if acks.Replicas == 0 {
		return 0, p.SetTotal(ctx, rdb, n, publish)
	}
	args := append(p.args(2), n, publish)
	_, acked, err := asIntAcked(permitTotal.runAckedThen(ctx, rdb, args, acks, []any{"set", req.Key, "1", "px", req.TTL.arg()}))
	return acked, err
}

// Lease returns the remaining lease of the permit id in ms after reclaiming
// every expired permit: -1 for a permit without lease; ok is false for an id
// the semaphore does not have.
func (p Permit) Lease(ctx context.Context, rdb Processor, id string, now int64, publish string) (ms int64, ok bool, err error) {
	v, err := evalInt(ctx, rdb, permitLease, p.keys, id, now, publish)
	return v, v != 0, err
}

// SetLease sets the expiry of the permit id (epoch ms, or NoExpiry) after
// reclaiming every expired permit: false when the semaphore does not have it.
func (p Permit) SetLease(ctx context.Context, rdb Processor, id string, expiry, now int64, publish string) (bool, error) {
	v, err := evalInt(ctx, rdb, permitLease, p.keys, id, now, publish, expiry)
	return v == 1, err
}
