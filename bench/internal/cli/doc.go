// Package cli holds what the benchmark commands share on their command
// line: defaults that depend on -quick, the choice of libraries (or cases)
// by name, the redis-server binary, and the optional JSON output.
package cli
