//go:build linux

package redistest

import "syscall"

// sysProcAttr puts a child in its own process group (so Kill can reach everything it forks and
// a terminal's Ctrl-C does not hit it before we clean up) and has the kernel SIGKILL it when the
// test binary dies, even by SIGKILL or a panic that skips cleanups.
//
// Pdeathsig fires when the OS thread that forked the child exits; the Go runtime only ends
// threads of goroutines that exit while locked with runtime.LockOSThread, which the testing
// package never does and this package does only when a Net's dialer cannot bring its thread
// back to its own network namespace (see dialIn).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
