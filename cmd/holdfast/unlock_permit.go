package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
)

// parsePermitID returns the permit id s in lowercase, or the usage error of a
// malformed one: a permit id is 32 hexadecimal characters (16 bytes), in
// either case as Redisson accepts them.
func parsePermitID(s string) (string, error) {
	id := strings.ToLower(s)
	if _, err := hex.DecodeString(id); err != nil || len(id) != 32 {
		return "", fmt.Errorf("--permit %q: a permit id is 32 hexadecimal characters (holdfast status NAME lists them)", s)
	}
	return id, nil
}

// forceReleasePermit releases the permit id of the permit-expirable semaphore
// name whoever holds it (ExpirableSemaphore.Release), asking first when ask is
// set, and says what it released. A permit that is not held is "nothing to
// release" (exit 0, so that running it again is harmless); a name that is not
// a semaphore is left alone (exitDataErr).
func forceReleasePermit(ctx context.Context, c *rlock.Client, rdb redis.UniversalClient, name, id string, ask bool, io stdio) int {
	st, err := inspect(ctx, rdb, name)
	if err != nil {
		return redisFailure(io, "unlock", err)
	}
	if code, done := notPermitSemaphore(io, st, id); done {
		return code
	}
	p := findPermit(st, id)
	if ask && !confirmPermit(io, st, id, p) {
		fmt.Fprintf(io.err, "holdfast unlock: permit %s of %s left as it is\n", id, name)
		return exitBusy
	}
	err = c.NewExpirableSemaphore(name).Release(ctx, id)
	switch {
	case errors.Is(err, rlock.ErrNoSuchPermit):
		sayNoSuchPermit(io, name, id)
		return exitOK
	case err != nil:
		return releaseFailure(ctx, rdb, name, kindPermits, err, io)
	}
	fmt.Fprintf(io.out, "force-released permit %s of %s (%s); announced on %s (%d subscribed)\n",
		id, name, permitLeaseOf(p), st.Channel, st.Subscribers)
	return exitOK
}

// notPermitSemaphore says why the permit id of st cannot be released, if it
// cannot: done is then true, with the exit code: 0 when st has no permit
// acquired (nothing to release), exitDataErr when it is not a semaphore.
func notPermitSemaphore(io stdio, st objectStatus, id string) (code int, done bool) {
	switch st.Kind {
	case kindPermits:
		if findPermit(st, id) == nil && st.AcquiredPermits <= int64(len(st.Permits)) {
			sayNoSuchPermit(io, st.Name, id)
			return exitOK, true
		}
		return exitOK, false
	case kindFree, kindCounter:
		sayNoSuchPermit(io, st.Name, id)
		return exitOK, true
	}
	what := headline(st)
	if st.Kind == kindNotALock {
		what = notA(wantOf(kindPermits), st.RedisType)
	}
	fmt.Fprintf(io.err, "holdfast unlock: %s: %s; no permit released\n", st.Name, what)
	return exitDataErr, true
}

// sayNoSuchPermit says that the permit id is not held in the semaphore name.
func sayNoSuchPermit(io stdio, name, id string) {
	fmt.Fprintf(io.out, "permit %s is not held in %s: nothing to release "+
		"(released, reclaimed after its lease ran out, or never acquired)\n", id, name)
}

// findPermit returns the permit id among those status read of st, or nil.
func findPermit(st objectStatus, id string) *permit {
	for i := range st.Permits {
		if st.Permits[i].ID == id {
			return &st.Permits[i]
		}
	}
	return nil
}

// permitLeaseOf says how long the permit p had left, when status read it.
func permitLeaseOf(p *permit) string {
	if p == nil {
		return "lease not read"
	}
	return permitLease(*p)
}

// confirmPermit asks on the terminal whether to release the permit id of st
// (p, when status read it), and reports whether the answer was yes.
func confirmPermit(io stdio, st objectStatus, id string, p *permit) bool {
	fmt.Fprintf(io.err, "force-release permit %s of semaphore %s (%s; %s available, %d acquired)? [y/N] ",
		id, st.Name, permitLeaseOf(p), st.Value, st.AcquiredPermits)
	answer := strings.ToLower(strings.TrimSpace(readLine(io.in)))
	return answer == "y" || answer == "yes"
}
