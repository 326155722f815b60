package lua

import (
	"context"
	_ "embed"
)

var (
	//go:embed latch_count_down.lua
	latchCountDownSrc string
	//go:embed latch_set.lua
	latchSetSrc string

	latchCountDown = syncScript("latch_count_down", latchCountDownSrc)
	latchSet       = syncScript("latch_set", latchSetSrc)
)

// Payloads on a countdown latch's channel (protocol §2.14).
const (
	LatchOpenMessage  = "0" // the count reached zero: the latch opened
	LatchResetMessage = "1" // trySetCount or delete
)

// LatchCountDown counts the latch name down by one (RCountDownLatch
// countDown): at zero it deletes the key and publishes LatchOpenMessage. It
// returns the new count (0 also for a latch that did not exist).
func LatchCountDown(ctx context.Context, rdb Processor, name, publish string, req Request) (int64, error) {
	return evalInt(ctx, rdb, latchCountDown, latchKeys(name, req), publish, req.TTL.arg())
}

// LatchTrySet sets the count of the latch name to n and publishes
// LatchResetMessage, only if it does not exist (trySetCount): true when it did.
func LatchTrySet(ctx context.Context, rdb Processor, name string, n int64, publish string, req Request) (bool, error) {
	v, err := evalInt(ctx, rdb, latchSet, latchKeys(name, req), publish, req.TTL.arg(), n)
	return v == 1, err
}

// LatchDelete deletes the latch name and publishes LatchResetMessage (delete):
// true when it existed.
func LatchDelete(ctx context.Context, rdb Processor, name, publish string, req Request) (bool, error) {
	v, err := evalInt(ctx, rdb, latchSet, latchKeys(name, req), publish, req.TTL.arg())
	return v == 1, err
}

func latchKeys(name string, req Request) []string {
	return []string{name, LatchChannel(name), req.Key}
}
