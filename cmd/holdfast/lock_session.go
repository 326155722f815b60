package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
)

// lockSession is one run of "holdfast lock": the connection, the lock client
// and, once acquired, the hold.
type lockSession struct {
	cfg  *lockConfig
	io   stdio
	sigs chan os.Signal // the relayed signals, from before the wait to the end

	rdb      redis.UniversalClient // nil until connected
	c        *rlock.Client         // nil until connected
	held     held                  // the lease or the permit; nil until acquired, and once released
	owner    string                // $HOLDFAST_OWNER: the hold's field in the lock's hash; "" with --permits
	token    string                // $HOLDFAST_TOKEN: the fencing token with --fenced, else ""
	permit   string                // $HOLDFAST_PERMIT: the permit's id with --permits, else ""
	lostSaid bool                  // the loss of the lock was reported
}

// held is what "holdfast lock" holds: a lock's lease (leaseHeld) or a
// semaphore's permit (permitsHeld).
type held interface {
	Done() <-chan struct{}             // closed when the hold ends: released or lost
	Err() error                        // why it ended; nil while held
	release(ctx context.Context) error // gives it back (Lease.Unlock, Permits.Release)
}

// leaseHeld is a lock's lease as a held.
type leaseHeld struct{ *rlock.Lease }

// release unlocks the lease.
func (l leaseHeld) release(ctx context.Context) error { return l.Unlock(ctx) }

// permitsHeld is a semaphore's permit as a held.
type permitsHeld struct{ *rlock.Permits }

// release releases the permit.
func (p permitsHeld) release(ctx context.Context) error { return p.Release(ctx) }

// cliService is the service the command's clients name in their records
// (rlock.WithService): holdfast status shows a lock held by "holdfast lock" as
// held by "holdfast-cli on HOST, pid PID, since …".
const cliService = "holdfast-cli"

// acquire connects and waits for the lock, until a signal interrupts the
// wait. It reports whether the lock is held; if not, it has said why on
// stderr and returns the exit code, and the session is closed.
func (s *lockSession) acquire(ctx context.Context) (int, bool) {
	wctx, stop := interruptible(ctx, s.sigs)
	code, err := s.connectAndLock(wctx)
	sig, interrupted := stop()
	switch {
	case interrupted: // even if the lock was taken meanwhile: the command must not start
		s.close()
		return signalCode(sig), false
	case err != nil:
		s.explain(ctx, err)
		s.close()
		return code, false
	}
	if code, err := s.findOwner(); err != nil {
		fmt.Fprintf(s.io.err, "holdfast %s: %q: %v\n", s.cfg.cmd(), s.cfg.name, err)
		s.close()
		return code, false
	}
	return exitOK, true
}

// connectAndLock connects to Redis and takes the lock, and returns the exit
// code of its error.
func (s *lockSession) connectAndLock(ctx context.Context) (int, error) {
	rdb, err := s.cfg.conn.open(ctx, s.io.env)
	if errors.Is(err, errConn) {
		return exitUnavailable, err
	}
	if err != nil {
		return exitUsage, err
	}
	s.rdb = rdb
	// no library log (WithLogger(nil)): the command says a loss itself, in one line
	if s.c, err = rlock.New(rdb, rlock.WithWatchdogTimeout(s.cfg.watchdog), rlock.WithReleaseTimeout(s.cfg.conn.timeout),
		rlock.WithService(cliService), rlock.WithLogger(nil)); err != nil {
		return exitUsage, err
	}
	stop := s.progress(ctx)
	defer stop()
	switch {
	case s.cfg.elect:
		err = s.campaign(ctx)
	case s.cfg.permits > 0:
		err = s.takePermit(ctx)
	default:
		err = s.takeLock(ctx)
	}
	return lockFailureCode(err, s.cfg.busyCode), err
}

// takeLock waits for the lock (at most -w, or one attempt with -n) and
// records the lease.
func (s *lockSession) takeLock(ctx context.Context) error {
	l, octx := s.cfg.locker(s.c), rlock.WithOwner(ctx)
	var lease *rlock.Lease
	var err error
	if s.cfg.noWait || s.cfg.wait > 0 {
		lease, err = l.TryLock(octx, s.cfg.tryLockOptions()...)
	} else {
		lease, err = l.Lock(octx, s.cfg.lockOptions()...)
	}
	if err == nil {
		s.held = leaseHeld{lease}
	}
	return err
}

// lockFailureCode is the exit code of a failed acquisition.
func lockFailureCode(err error, busy int) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, rlock.ErrNotAcquired):
		return busy
	case errors.Is(err, rlock.ErrInvalidArgument):
		return exitUsage // NAME cannot be a lock ("a{b")
	case errors.Is(err, rlock.ErrWrongType):
		return exitDataErr // NAME holds another kind of key
	case errors.Is(err, rlock.ErrConflict), errors.Is(err, rlock.ErrClosed):
		return exitSoftware
	}
	return exitUnavailable // Redis failed the call (connection lost, replicas missing...)
}

// explain says on stderr, in one line, why the lock was not taken: who holds
// it when it is busy (unless -q), what the key holds when it is not a lock
// (notA), else the error.
func (s *lockSession) explain(ctx context.Context, err error) {
	if errors.Is(err, rlock.ErrWrongType) && s.rdb != nil {
		if line, ok := wrongTypeLine(ctx, s.rdb, s.cfg.name, s.cfg.nameKind()); ok {
			fmt.Fprintf(s.io.err, "holdfast %s: %s; left alone\n", s.cfg.cmd(), line)
			return
		}
	}
	if !errors.Is(err, rlock.ErrNotAcquired) {
		fmt.Fprintf(s.io.err, "holdfast %s: %v\n", s.cfg.cmd(), err)
		return
	}
	if s.cfg.quiet {
		return
	}
	what := "is busy"
	if s.cfg.wait > 0 {
		what = "is still busy after " + s.cfg.wait.String()
	}
	fmt.Fprintf(s.io.err, "holdfast %s: %q %s: %s\n", s.cfg.cmd(), s.cfg.name, what, s.describe(ctx))
}

// describe says who holds the lock or the semaphore's permits, for a
// message (describeHolder, describePermits).
func (s *lockSession) describe(ctx context.Context) string {
	switch {
	case s.cfg.elect:
		return describeLeader(ctx, s.c, s.rdb, s.cfg.name)
	case s.cfg.permits > 0:
		return describePermits(ctx, s.rdb, s.cfg.name)
	}
	return describeHolder(ctx, s.rdb, s.cfg.name)
}

// findOwner records what the command is told of the hold: the hold's field in
// the lock's hash (HOLDFAST_OWNER), the fencing token (HOLDFAST_TOKEN), the
// permit's id (HOLDFAST_PERMIT). On error (the hold already ended) it returns
// the exit code.
func (s *lockSession) findOwner() (int, error) {
	if s.held.Err() != nil {
		return exitLockLost, errors.New("lost before the command started (is the lease too short?)")
	}
	switch h := s.held.(type) {
	case leaseHeld:
		s.owner = h.Holder()
		if s.cfg.kind == "fenced" {
			s.token = strconv.FormatInt(h.Token(), 10)
		}
	case permitsHeld:
		s.permit = h.IDs()[0]
	case leadershipHeld:
		s.owner, s.token = h.Holder(), strconv.FormatInt(h.Token(), 10)
	}
	return exitOK, nil
}

// release gives the lock back after the hold, and returns the exit code:
// code, or exitLockLost when the lock was found gone (lost while the command
// ran). A release that fails leaves the lock to expire, which it says.
func (s *lockSession) release(ctx context.Context, code int) int {
	err := s.unlock(ctx)
	switch {
	case err == nil || s.lostSaid:
		return code
	case holdGone(err):
		s.sayLost("it was gone when the command ended")
		return exitLockLost
	}
	fmt.Fprintf(s.io.err, "holdfast %s: could not release %q: %v\n", s.cfg.cmd(), s.cfg.name, err) // says when it expires
	return code
}

// holdGone reports whether err, of a release, says that the hold was already
// gone: the lock not held or lost, the permit lost or not held any more.
func holdGone(err error) bool {
	return errors.Is(err, rlock.ErrNotHeld) || errors.Is(err, rlock.ErrLockLost) ||
		errors.Is(err, rlock.ErrPermitLost) || errors.Is(err, rlock.ErrNoSuchPermit)
}

// unlock gives the lease or permit back, once. ctx's cancellation (a signal
// may have cancelled it) does not stop the release: the library bounds it by
// the client's release timeout, the connect timeout (see connectAndLock).
func (s *lockSession) unlock(ctx context.Context) error {
	h := s.held
	if h == nil {
		return nil
	}
	s.held = nil
	return h.release(ctx)
}

// close releases the lock if still held, and closes the lock client and the
// connection.
func (s *lockSession) close() {
	_ = s.unlock(context.Background())
	if s.c != nil {
		_ = s.c.Close()
	}
	if s.rdb != nil {
		_ = s.rdb.Close()
	}
}

// sayLost reports the loss of the lock on stderr, once.
func (s *lockSession) sayLost(what string) {
	if s.lostSaid {
		return
	}
	s.lostSaid = true
	fmt.Fprintf(s.io.err, "holdfast %s: lost %q: %s\n", s.cfg.cmd(), s.cfg.name, what)
}

// signalLag bounds how long an interrupted wait waits for the signal that
// interrupted it: main's NotifyContext and sigs both receive SIGINT and
// SIGTERM, and ctx may be cancelled a moment before sigs has the signal.
const signalLag = 100 * time.Millisecond

// interruptible returns a copy of ctx that a signal on sigs cancels too, and
// the function that stops watching sigs: it returns the signal that cancelled
// the context (nil when ctx was cancelled by other means) and whether it was
// cancelled.
func interruptible(ctx context.Context, sigs <-chan os.Signal) (context.Context, func() (os.Signal, bool)) {
	wctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop, done := make(chan struct{}), make(chan struct{})
	var sig os.Signal
	go func() {
		defer close(done)
		select {
		case sig = <-sigs:
		case <-ctx.Done():
			select {
			case sig = <-sigs:
			case <-time.After(signalLag):
			}
		case <-stop:
			return
		}
		cancel(errInterrupted)
	}()
	return wctx, func() (os.Signal, bool) {
		close(stop)
		<-done
		interrupted := context.Cause(wctx) == errInterrupted
		cancel(nil)
		return sig, interrupted
	}
}

// errInterrupted is the cause of a wait cancelled by a signal.
var errInterrupted = errors.New("interrupted")
