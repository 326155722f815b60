package lua

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Redisson's prefixes for the keys and channels of a lock.
const (
	channelPrefix = "redisson_lock__channel"
	latchPrefix   = "redisson_unlock_latch"
	tokenPrefix   = "redisson_lock_token"
	queuePrefix   = "redisson_lock_queue"
	timeoutPrefix = "redisson_lock_timeout"
	rwPrefix      = "redisson_rwlock"
)

// WriteSuffix turns an owner's field into its field as the holder of a
// read/write lock's write side ("<client uuid>:<owner id>:write").
const WriteSuffix = ":write"

// Payloads published on a lock's channels.
const (
	UnlockMessage  = "0" // a lock was released: wakes a waiter
	WakeAllMessage = "1" // a read/write lock's write side was released: wakes every waiter
)

// ChannelName returns the pub/sub channel on which releases of the lock name are
// announced: "redisson_lock__channel:{name}", or "redisson_lock__channel:name" when
// name already contains a '{' (Redisson's prefix rule, so that the channel shares
// the lock's hash slot).
func ChannelName(name string) string { return prefixed(channelPrefix, name) }

// TokenName returns the fencing token counter of the lock name (Redisson's
// RFencedLock): "redisson_lock_token:{name}", with ChannelName's rule.
func TokenName(name string) string { return prefixed(tokenPrefix, name) }

// QueueName returns the waiters' queue of the fair lock name (Redisson's
// RFairLock): the list "redisson_lock_queue:{name}", with ChannelName's rule.
func QueueName(name string) string { return prefixed(queuePrefix, name) }

// TimeoutsName returns the waiters' deadlines of the fair lock name: the sorted
// set "redisson_lock_timeout:{name}", with ChannelName's rule.
func TimeoutsName(name string) string { return prefixed(timeoutPrefix, name) }

// WaiterChannel returns the channel on which a fair lock's release wakes the
// waiter field, the head of its queue: "redisson_lock__channel:{name}:<field>".
func WaiterChannel(name, field string) string { return ChannelName(name) + ":" + field }

// RWChannelName returns the channel of the read/write lock name (Redisson's
// RReadWriteLock), shared by its read and write sides: "redisson_rwlock:{name}".
func RWChannelName(name string) string { return prefixed(rwPrefix, name) }

// ReadTimeoutName returns the key that keeps the k-th read hold of the owner
// field on the read/write lock name alive: "{name}:<field>:rwlock_timeout:<k>",
// or "name:<field>:rwlock_timeout:<k>" when name has a '{' (Redisson's suffix
// rule).
func ReadTimeoutName(name, field string, k int) string {
	return readTimeoutPrefix(name) + ":" + field + ":rwlock_timeout:" + strconv.Itoa(k)
}

// readTimeoutPrefix is the part of the read timeout keys before the field.
func readTimeoutPrefix(name string) string {
	if strings.Contains(name, "{") {
		return name
	}
	return "{" + name + "}"
}

// LatchName returns the unlock latch key of one release request:
// "redisson_unlock_latch:{name}:<requestID>".
func LatchName(name, requestID string) string {
	if strings.Contains(name, "{") {
		return latchPrefix + ":" + name + ":" + requestID
	}
	return latchPrefix + ":{" + name + "}:" + requestID
}

// Redisson's names for the keys and channels of the synchronizers
// (shared/redisson-protocol.md §0.4, §1.8–§1.10, §9).
const (
	semaphorePrefix      = "redisson_sc"
	latchChannelPrefix   = "redisson_countdownlatch__channel__"
	PermitTimeoutsSuffix = ":timeout" // see PermitTimeoutsName
)

// SemaphoreChannel returns the channel of the semaphore name, on which
// releases publish the available permits as a decimal integer (protocol §2.11,
// §2.14): "redisson_sc:{name}", or "redisson_sc:name" when name contains '{'
// (Redisson's prefix rule, as ChannelName; protocol §0.2, §0.4, §1.8). RSemaphore
// and RPermitExpirableSemaphore of one name share it (§1.9).
func SemaphoreChannel(name string) string { return prefixed(semaphorePrefix, name) }

// PermitTimeoutsName returns the sorted set of the acquired permits of the
// permit-expirable semaphore name (RPermitExpirableSemaphore):
// "{name}:timeout", or "name:timeout" when name contains '{' (Redisson's suffix
// rule, protocol §0.2, §1.9). Each member is a permit id (16 raw bytes since
// Redisson 3.17.0) and its score the permit's expiry in epoch milliseconds, on
// the clock of the client that set it, or 922337203685477 for a permit without
// a lease (protocol §1.9, §2.12).
func PermitTimeoutsName(name string) string {
	if strings.Contains(name, "{") {
		return name + PermitTimeoutsSuffix
	}
	return "{" + name + "}" + PermitTimeoutsSuffix
}

// LatchChannel returns the channel of the countdown latch name
// (RCountDownLatch): "redisson_countdownlatch__channel__{name}", braces always
// added, even when name contains '{', and no colon (protocol §0.4, §1.10,
// §2.13, §9). It carries "0" when the count reaches zero and "1" on
// trySetCount and delete (§2.14). See CheckLatchName for the names whose
// channel falls in another cluster slot.
func LatchChannel(name string) string { return latchChannelPrefix + "{" + name + "}" }

// prefixed is Redisson's prefixName: prefix + ":{" + name + "}", or
// prefix + ":" + name when name has a hash tag of its own.
func prefixed(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// ErrSlot says that a name's keys and channels would not all share the name's
// Redis Cluster hash slot. Every name check (CheckName, CheckSemaphoreName,
// CheckExpirableSemaphoreName, CheckLatchName) returns an error matching it;
// its own text is the lock check's.
var ErrSlot = errors.New("its channel and unlock latches would hash to another cluster slot than the name")

// tagRule and tagAdvice explain a refusal under Redisson's prefix and suffix
// rules (every family but the latch).
const (
	tagRule   = "Redis hashes only the text inside the first {...} when it is not empty"
	tagAdvice = "use a name with a non-empty {tag}, such as %q, or one without braces"
)

// CheckName returns an error matching ErrSlot for a lock name whose channel and
// latches, named by Redisson's rule (see ChannelName), would hash to another
// cluster slot than the name itself: a name that contains '}' but no non-empty
// {tag} at its first '{' ("a}b", "acc:{}:x"), or a '{' that no '}' closes
// ("a{b"). Scripts touching such a name's keys fail with CROSSSLOT on Redis
// Cluster (and Redisson's do too); holdfast refuses them everywhere, so that a
// program tested on one server does not fail on a cluster.
func CheckName(name string) error {
	if tagged(name) && sameSlot(name, ChannelName(name), LatchName(name, "0")) {
		return nil
	}
	return fmt.Errorf("%w (%s): "+tagAdvice, ErrSlot, tagRule, "{"+bare(name, "lock")+"}")
}

// CheckSemaphoreName returns an error matching ErrSlot for a semaphore name
// (RSemaphore) whose channel, SemaphoreChannel (Redisson's prefix rule,
// protocol §0.2, §1.8), would hash to another cluster slot than the name: the
// names CheckName refuses. Redisson's release script takes the name and the
// channel as KEYS and fails with CROSSSLOT on Redis Cluster for them.
func CheckSemaphoreName(name string) error {
	if tagged(name) && sameSlot(name, SemaphoreChannel(name), requestKey(name, []byte("0"))) {
		return nil
	}
	return refuse("its channel", tagRule, tagAdvice, "{"+bare(name, "semaphore")+"}")
}

// CheckExpirableSemaphoreName returns an error matching ErrSlot for a
// permit-expirable semaphore name (RPermitExpirableSemaphore) whose channel
// (SemaphoreChannel, the prefix rule) or permits' zset (PermitTimeoutsName,
// the suffix rule) would hash to another cluster slot than the name (protocol
// §0.2, §1.9, §2.12): the names CheckName refuses.
func CheckExpirableSemaphoreName(name string) error {
	if tagged(name) && sameSlot(name, SemaphoreChannel(name), PermitTimeoutsName(name), requestKey(name, []byte("0"))) {
		return nil
	}
	return refuse("its channel and permits' zset", tagRule, tagAdvice, "{"+bare(name, "semaphore")+"}")
}

// CheckLatchName returns an error matching ErrSlot for a countdown latch name
// (RCountDownLatch) whose channel, LatchChannel, would hash to another cluster
// slot than the name (protocol §1.10, §9). The channel always wraps the whole
// name in braces, so its hash tag is the name's text up to its first '}' and
// differs from the name's own: a name with a '}' is refused ("{t}:latch",
// "a}b"; the check compares slots), as is "" (an empty tag), while "a{b" (no
// '}') is accepted. Redisson's latch scripts take the name and
// the channel as KEYS and fail with CROSSSLOT on Redis Cluster for the names
// refused here.
func CheckLatchName(name string) error {
	if !strings.Contains(name, "}") && sameSlot(name, LatchChannel(name), requestKey(name, []byte("0"))) {
		return nil
	}
	return refuse("its channel", "the latch channel "+LatchChannel("<name>")+" always adds braces around the name, "+
		"so Redis hashes a name with braces by another text than the name's own tag", "use a name without braces, such as %q",
		bare(name, "latch"))
}

// tagged reports whether name's braces, if it has any, make a hash tag that
// Redisson's prefix and suffix rules keep: a non-empty {tag} at its first '{'.
// A name with braces but no such tag hashes whole, and its derived keys hash
// by other texts (comparing a few of their slots with the name's can agree by
// chance for some lengths, so the rule is checked first).
func tagged(name string) bool {
	if !strings.ContainsAny(name, "{}") {
		return true
	}
	s := strings.IndexByte(name, '{')
	return s >= 0 && strings.IndexByte(name[s+1:], '}') > 0
}

// sameSlot reports whether every one of derived hashes to name's cluster slot.
func sameSlot(name string, derived ...string) bool {
	slot := Slot(name)
	for _, d := range derived {
		if Slot(d) != slot {
			return false
		}
	}
	return true
}

// bare returns name without its braces, or def when nothing else is left: the
// text of the name a refusal suggests.
func bare(name, def string) string {
	if s := strings.NewReplacer("{", "", "}", "").Replace(name); s != "" {
		return s
	}
	return def
}

// refuse returns a name check's error: what would hash elsewhere, why, and
// advice (a format with one %q, the suggested name).
func refuse(what, why, advice, suggestion string) error {
	return &slotError{what + " would hash to another cluster slot than the name (" + why + "): " +
		fmt.Sprintf(advice, suggestion)}
}

// slotError is the refusal of a name by a family's check; it matches ErrSlot.
type slotError struct{ msg string }

func (e *slotError) Error() string        { return e.msg }
func (e *slotError) Is(target error) bool { return target == ErrSlot }
