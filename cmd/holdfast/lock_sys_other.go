//go:build !unix

package main

import "os"

// relayed returns the signals "holdfast lock" catches: they interrupt the
// wait, and reach the command once it runs (where the system can send them).
func relayed() []os.Signal { return []os.Signal{os.Interrupt} }

// signalCode is the exit code of holdfast interrupted by a signal: 130.
func signalCode(os.Signal) int { return 130 }

// exitStatus is the command's exit code.
func exitStatus(ps *os.ProcessState) int { return ps.ExitCode() }

// terminate stops the command: this system has no SIGTERM.
func terminate(p *os.Process) error { return p.Kill() }
