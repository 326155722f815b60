//go:build unix

package main

import (
	"os"
	"os/signal"
	"syscall"
)

// relayed returns the signals "holdfast lock" catches: they interrupt the
// wait, and reach the command once it runs. Those that holdfast was started
// with ignored (nohup's SIGHUP) are left ignored, for the command too.
func relayed() []os.Signal {
	var sigs []os.Signal
	for _, s := range []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2} {
		if !signal.Ignored(s) {
			sigs = append(sigs, s)
		}
	}
	return sigs
}

// signalCode is the exit code of holdfast interrupted by sig: 128 + its
// number, as a shell's; 130 (SIGINT's) when sig is nil.
func signalCode(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 128 + int(syscall.SIGINT)
}

// exitStatus is the command's status as a shell reports it: its exit code,
// or 128 + the number of the signal that killed it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// terminate asks the command to stop: SIGTERM.
func terminate(p *os.Process) error { return p.Signal(syscall.SIGTERM) }
