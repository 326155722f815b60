//go:build unix && !linux

package redistest

import "syscall"

// sysProcAttr puts a child in its own process group. Outside Linux there is no Pdeathsig:
// children are stopped by tb.Cleanup and Main only.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
