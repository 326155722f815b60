package main

import "context"

// The subcommands below are being written; each replaces its stub.

func lockCommand(ctx context.Context, args []string, io stdio) int { return notYet(io, "lock") }

func notYet(io stdio, name string) int {
	_, _ = io.err.Write([]byte("holdfast: " + name + ": not implemented yet\n"))
	return exitSoftware
}
