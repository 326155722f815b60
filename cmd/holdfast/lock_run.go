package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"time"
)

// The variables holdfast gives the command.
const (
	envLock   = "HOLDFAST_LOCK"   // the lock's (or semaphore's) name
	envOwner  = "HOLDFAST_OWNER"  // the hold's field in the lock's hash
	envToken  = "HOLDFAST_TOKEN"  // the fencing token (--fenced)
	envPermit = "HOLDFAST_PERMIT" // the permit's id (--permits)
)

// commandWaitDelay bounds how long, once the command has exited, holdfast
// waits for the copies of its output when its streams are not files (the
// command's own children may keep them open).
const commandWaitDelay = time.Second

// hold holds the lock while cmd runs, or until a signal without a command, and
// returns the exit code; the caller releases the lock.
func (s *lockSession) hold(ctx context.Context, cmd *exec.Cmd) int {
	if cmd == nil {
		return s.holdIdle(ctx)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.io.in, s.io.out, s.io.err
	cmd.Env = commandEnv(os.Environ(), s.cfg.name, s.owner, s.token, s.permit)
	cmd.WaitDelay = commandWaitDelay
	if err := cmd.Start(); err != nil {
		return cannotRun(s.io, s.cfg.cmd(), s.cfg.argv[0], err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // its status is in cmd.ProcessState
		close(exited)
	}()
	if s.supervise(cmd.Process, exited) {
		return exitLockLost
	}
	if cmd.ProcessState == nil {
		return exitSoftware
	}
	return exitStatus(cmd.ProcessState)
}

// supervise forwards the relayed signals to the command until it has exited
// (exited is closed). If the lock is lost meanwhile, it says so, sends the
// command SIGTERM, then SIGKILL after --kill-grace, and reports the loss.
func (s *lockSession) supervise(p *os.Process, exited <-chan struct{}) (lost bool) {
	lostc := s.held.Done()
	var kill <-chan time.Time // after --kill-grace, once the lock is lost
	for {
		select {
		case <-exited:
			return lost
		case sig := <-s.sigs:
			_ = p.Signal(sig) // fails only when the command has just exited
		case <-lostc:
			lostc, lost = nil, true
			s.sayLost(fmt.Sprintf("%v; stopping the command (SIGTERM, SIGKILL %v later)", s.held.Err(), s.cfg.killGrace))
			_ = terminate(p)
			kill = time.After(s.cfg.killGrace)
		case <-kill:
			kill = nil
			_ = p.Kill()
		}
	}
}

// holdIdle holds the lock without a command until a relayed signal or the
// end of ctx (exit 0, the caller releases it), or until it is lost.
func (s *lockSession) holdIdle(ctx context.Context) int {
	if !s.cfg.quiet {
		as := "as " + s.owner
		if s.permit != "" {
			as = "with permit " + s.permit
		}
		fmt.Fprintf(s.io.err, "holdfast %s: holding %q %s until interrupted (Ctrl-C, SIGTERM)\n", s.cfg.cmd(), s.cfg.name, as)
	}
	select {
	case <-s.sigs:
	case <-ctx.Done():
	case <-s.held.Done():
		s.sayLost(s.held.Err().Error())
		return exitLockLost
	}
	return exitOK
}

// commandEnv returns base without holdfast's variables (an enclosing holdfast
// may have set them), followed by those of this hold: HOLDFAST_LOCK=name and
// those of owner, token and permit that are not "".
func commandEnv(base []string, name, owner, token, permit string) []string {
	env := make([]string, 0, len(base)+3)
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if k != envLock && k != envOwner && k != envToken && k != envPermit {
			env = append(env, kv)
		}
	}
	env = append(env, envLock+"="+name)
	for _, v := range [][2]string{{envOwner, owner}, {envToken, token}, {envPermit, permit}} {
		if v[1] != "" {
			env = append(env, v[0]+"="+v[1])
		}
	}
	return env
}

// cannotRun says in one line why the command could not be started, and
// returns the shell's code for it: 127 when it does not exist, 126 otherwise
// (not executable, not a program).
func cannotRun(io stdio, cmd, name string, err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(io.err, "holdfast %s: %s: command not found\n", cmd, name)
		return exitNotFound
	}
	for inner := errors.Unwrap(err); inner != nil; inner = errors.Unwrap(inner) {
		err = inner // the cause alone ("permission denied"), without exec's wrapping
	}
	fmt.Fprintf(io.err, "holdfast %s: %s: cannot run: %v\n", cmd, name, err)
	return exitCannotRun
}
