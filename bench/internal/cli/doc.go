// Package cli holds what the benchmark commands share on their command
// line: the common flags (Flags) and their defaults, which depend on
// -quick, the choice of libraries (or cases) by name, the redis-server
// binary, and the start of a run (Start).
package cli
