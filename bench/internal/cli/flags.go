package cli

import (
	"encoding/json"
	"os"
	"os/exec"
)

// Default sets *v, if it is zero, to quick in a quick run and to full
// otherwise.
func Default[T comparable](v *T, full, quick T, isQuick bool) {
	var zero T
	if *v != zero {
		return
	}
	*v = full
	if isQuick {
		*v = quick
	}
}

// RedisServer returns bin, or if it is empty the redis-server on PATH, or
// else /usr/bin/redis-server.
func RedisServer(bin string) string {
	if bin != "" {
		return bin
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p
	}
	return "/usr/bin/redis-server"
}

// WriteJSON writes v, indented, to the file path.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
