package lua

import (
	"context"
	_ "embed"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed renew.lua
var renewSrc string

var renewScript = newScript("renew", renewSrc)

//go:embed check.lua
var checkSrc string

var checkScript = newScript("check", checkSrc)

// RenewalKind is what a Renewal extends.
type RenewalKind uint8

// The kinds of renewal.
const (
	// RenewLockHold is a lock hold (Redisson's LockTask, protocol §2.4): Member
	// is the owner's field in the hash Key, the lock's name; a renewal sets
	// Key's time to live to the lease.
	RenewLockHold RenewalKind = iota
	// RenewReadHold is a read hold of a read/write lock (Redisson's
	// ReadLockTask): Member is the owner's field in the hash Key, Prefix the
	// prefix of the hold's timeout keys (see ReadTimeoutName); a renewal sets
	// each of the hold's timeout keys to the lease, and Key to the longer of its
	// own time to live and the lease.
	RenewReadHold
	// RenewPermit is a permit of a permit-expirable semaphore (protocol §1.9,
	// §2.12), which Redisson never renews: Member is the permit id (16 raw
	// bytes) in the sorted set Key (PermitTimeoutsName), whose score is the
	// permit's expiry in epoch ms on the client's clock. A renewal sets the
	// score to now + lease, now being the client's clock at the batch's send
	// time, if the permit is still a member and not expired (a score above now;
	// Redisson reclaims a permit whose score is not). The semaphore's other keys
	// are not touched: nothing is published, nothing is reclaimed.
	RenewPermit
)

// kindArg is k as renew.lua takes it.
func (k RenewalKind) kindArg() string {
	switch k {
	case RenewLockHold:
		return "lock"
	case RenewReadHold:
		return "read"
	case RenewPermit:
		return "permit"
	}
	return "unknown"
}

// Renewal is one hold the watchdog renews: its kind, its key, its member in
// the key, and for a read hold the prefix of its timeout keys. Lock.Renewal
// and PermitRenewal build them.
type Renewal struct {
	Kind   RenewalKind
	Key    string // the lock's hash; a permit's sorted set
	Member string // the owner's field in the hash; the permit's id in the sorted set
	Prefix string // RenewReadHold: the read timeout keys' prefix; "" otherwise
}

// Renewal returns the renewal of the hold of the owner field on the lock l: a
// read hold with its timeout keys for the read side of a read/write lock, a
// lock hold for the others.
func (l *Lock) Renewal(field string) Renewal {
	if l.layout == LayoutRead {
		return Renewal{Kind: RenewReadHold, Key: l.name, Member: field, Prefix: readTimeoutPrefix(l.name)}
	}
	return Renewal{Kind: RenewLockHold, Key: l.name, Member: field}
}

// PermitRenewal returns the renewal of the permit id (16 raw bytes) of the
// permit-expirable semaphore name.
func PermitRenewal(name, id string) Renewal {
	return Renewal{Kind: RenewPermit, Key: PermitTimeoutsName(name), Member: id}
}

// RenewCmd queues, as EVALSHA on a pipeline, the extension to lease of every hold
// still in Redis, of any kind (renew.lua): the watchdog sends many batches in
// one round trip. now is the client's wall clock at the send (a permit's new
// expiry is now + lease, in epoch ms). With reread, each key extended is read
// once more after its extension, so that a connection with client tracking
// on (NOLOOP) keeps tracking it. All keys of one batch must share one hash
// slot. Read the reply with RenewResult after Exec; a NOSCRIPT error (see
// IsNoScript) means the script must be loaded (LoadRenew) and the batch sent
// again.
func RenewCmd(ctx context.Context, p redis.Pipeliner, holds []Renewal, now time.Time, lease time.Duration, reread bool) *redis.Cmd {
	keys := make([]string, len(holds))
	ms, at := millis(lease), now.UnixMilli()
	args := make([]any, 0, 3*len(holds)+4)
	flag := "0"
	if reread {
		flag = "1"
	}
	args = append(args, ms, at, at+ms, flag)
	for i, h := range holds {
		keys[i] = h.Key
		args = append(args, h.Kind.kindArg(), h.Member, h.Prefix)
	}
	return renewScript.evalSha(ctx, p, keys, args...)
}

// LoadRenew loads the renewal script into the server's script cache, after a
// pipeline of RenewCmd was answered NOSCRIPT.
func LoadRenew(ctx context.Context, c redis.Scripter) error {
	return renewScript.load(ctx, c)
}

// RenewResult reads the reply of a renewal: per key, whether it was extended.
func RenewResult(cmd *redis.Cmd) ([]bool, error) {
	v, err := cmd.Int64Slice()
	if err != nil {
		return nil, ScriptError(err)
	}
	out := make([]bool, len(v))
	for i, x := range v {
		out[i] = x == 1
	}
	return out, nil
}

// What CheckResult answers for a hold no longer in Redis (Gone), and for one
// whose key or score does not expire (NoTimeout).
const (
	Gone      int64 = -2
	NoTimeout int64 = -1
)

// CheckCmd queues, as EVALSHA on a pipeline, the look at every hold of a batch
// (check.lua): whether it is still in Redis, and how long it has left. It
// changes nothing; on a connection with CLIENT TRACKING on, its reads make the
// server track the keys. now is the client's wall clock (a permit's score is
// compared with it, as a renewal does). All keys of one batch must share one
// hash slot. Read the reply with CheckResult; NOSCRIPT means LoadCheck.
func CheckCmd(ctx context.Context, p redis.Pipeliner, holds []Renewal, now time.Time) *redis.Cmd {
	keys := make([]string, len(holds))
	args := make([]any, 0, 2*len(holds)+1)
	args = append(args, now.UnixMilli())
	for i, h := range holds {
		keys[i] = h.Key
		args = append(args, h.Kind.kindArg(), h.Member)
	}
	return checkScript.evalSha(ctx, p, keys, args...)
}

// LoadCheck loads the check script into the server's script cache.
func LoadCheck(ctx context.Context, c redis.Scripter) error {
	return checkScript.load(ctx, c)
}

// CheckResult reads the reply of a check: per hold, Gone, NoTimeout, or its
// remaining lease in ms.
func CheckResult(cmd *redis.Cmd) ([]int64, error) {
	v, err := cmd.Int64Slice()
	return v, ScriptError(err)
}
