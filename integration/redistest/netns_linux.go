//go:build linux

package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// dialIn dials addr from inside the network namespace ns (a name in /var/run/netns).
//
// A socket stays in the namespace of the thread that made it, whatever thread uses
// it later. So the dial runs on a goroutine locked to its thread, which enters ns
// for the dial and returns to its own namespace after it; the thread is then
// unlocked and reused. It is not left to die locked: the Go runtime ends the thread
// of a goroutine that exits locked, and the kernel then sends its Pdeathsig
// (SIGKILL, see sysProcAttr) to every child that thread once started, e.g. a
// redis-server started earlier by another goroutine on that thread. Only when the
// thread cannot return to its namespace does the goroutine exit locked.
func dialIn(ctx context.Context, ns, network, addr string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		conn, back, err := dialOnThread(ctx, ns, network, addr)
		if back {
			runtime.UnlockOSThread()
		}
		ch <- result{conn, err}
	}()
	r := <-ch
	return r.conn, r.err
}

// dialOnThread does dialIn's work on the locked thread; back reports whether the
// thread is in its own namespace again.
func dialOnThread(ctx context.Context, ns, network, addr string) (conn net.Conn, back bool, err error) {
	own, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, true, fmt.Errorf("redistest: %w", err)
	}
	defer own.Close()
	target, err := os.Open(filepath.Join(netnsDir, ns))
	if err != nil {
		return nil, true, fmt.Errorf("redistest: namespace of a Net host: %w", err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("redistest: entering namespace %s: %w", ns, err)
	}
	var d net.Dialer
	conn, err = d.DialContext(ctx, network, addr)
	if unix.Setns(int(own.Fd()), unix.CLONE_NEWNET) != nil {
		return conn, false, err
	}
	return conn, true, err
}
