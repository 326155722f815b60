package lua

import "strings"

// Redisson's prefixes for the keys and channels of a lock.
const (
	channelPrefix = "redisson_lock__channel"
	latchPrefix   = "redisson_unlock_latch"
)

// UnlockMessage is the payload published when a lock is released.
const UnlockMessage = "0"

// ChannelName returns the pub/sub channel on which releases of the lock name are
// announced: "redisson_lock__channel:{name}", or "redisson_lock__channel:name" when
// name already contains a '{' (Redisson's prefix rule, so that the channel shares
// the lock's hash slot).
func ChannelName(name string) string { return prefixed(channelPrefix, name) }

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
