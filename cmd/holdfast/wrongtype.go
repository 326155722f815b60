package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"
)

// notA is the one wording, in every command, of a key that is not the kind of
// object the command expected: "not a lock: the key holds a string". want is
// "lock", "semaphore" or "latch"; redisType is TYPE of the key.
func notA(want, redisType string) string {
	return fmt.Sprintf("not a %s: the key holds a %s", want, redisType)
}

// wantOf is the kind of object a name is expected to be when the user says it
// is as (a lock for "", kindSema, kindPermits or kindLatch), as notA names it.
func wantOf(as string) string {
	switch as {
	case kindSema, kindPermits:
		return "semaphore"
	case kindLatch:
		return "latch"
	}
	return "lock"
}

// fits reports whether st is an object of the kind as, or nothing: what a
// command expecting that kind can work on.
func fits(st objectStatus, as string) bool {
	switch as {
	case kindSema, kindPermits, kindLatch:
		return slices.Contains([]string{kindFree, kindCounter, kindPermits, kindSema, kindLatch}, st.Kind)
	}
	return slices.Contains([]string{kindFree, kindLock, kindFair, kindRW}, st.Kind)
}

// wrongTypeLine says, after a call on name expecting the kind as failed with
// rlock.ErrWrongType, what the key holds: "NAME: not a lock: the key holds a
// string" (notA). It reads the key again; ok is false when the key fits the
// kind now (it changed meanwhile, or the wrong key was another one, a leader
// record, say), or could not be read.
func wrongTypeLine(ctx context.Context, rdb redis.UniversalClient, name, as string) (line string, ok bool) {
	st, err := inspectAs(ctx, rdb, name, as)
	if err != nil || fits(st, as) {
		return "", false
	}
	return name + ": " + notA(wantOf(as), st.RedisType), true
}
