//go:build noholdfast

package libs

// Built with -tags noholdfast: holdfast's Mutex is left out (for running the
// competitors while the library does not build).
