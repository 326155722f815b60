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

// prefixed is Redisson's prefixName: prefix + ":{" + name + "}", or
// prefix + ":" + name when name has a hash tag of its own.
func prefixed(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// ErrSlot says that a lock name's channel and latch keys would not share the
// name's Redis Cluster hash slot.
var ErrSlot = errors.New("its channel and unlock latches would hash to another cluster slot than the name")

// CheckName returns an error matching ErrSlot for a lock name whose channel and
// latches, named by Redisson's rule (see ChannelName), would hash to another
// cluster slot than the name itself: a name that contains '}' but no non-empty
// {tag} at its first '{' ("a}b", "acc:{}:x"), or a '{' that no '}' closes
// ("a{b"). Scripts touching such a name's keys fail with CROSSSLOT on Redis
// Cluster (and Redisson's do too); holdfast refuses them everywhere, so that a
// program tested on one server does not fail on a cluster.
func CheckName(name string) error {
	slot := Slot(name)
	if Slot(ChannelName(name)) == slot && Slot(LatchName(name, "0")) == slot {
		return nil
	}
	tag := strings.NewReplacer("{", "", "}", "").Replace(name)
	if tag == "" {
		tag = "lock"
	}
	return fmt.Errorf("%w (Redis hashes only the text inside the first {...} when it is not empty): "+
		"use a name with a non-empty {tag}, such as %q, or one without braces", ErrSlot, "{"+tag+"}")
}
