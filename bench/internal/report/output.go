package report

import (
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Output is where a command writes: its report directory (-out) and the
// optional JSON file (-json).
type Output struct{ Dir, JSON string }

// Write writes content to the file name in the directory, which it makes
// when missing, and returns the file's path.
func (o Output) Write(name, content string) (string, error) {
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(o.Dir, name)
	return path, os.WriteFile(path, []byte(content), 0o644)
}

// Plots makes the directory's img/ and runs draw on it ("plots: " before
// its error).
func Plots[T any](o Output, draw func(dir string) (T, error)) (T, error) {
	dir := filepath.Join(o.Dir, "img")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		var zero T
		return zero, err
	}
	plots, err := draw(dir)
	if err != nil {
		err = fmt.Errorf("plots: %w", err)
	}
	return plots, err
}

// Wrote logs that the report path is written, with its plots in img/ if
// there are any, and how long the run took.
func (o Output) Wrote(path string, plots int, elapsed time.Duration) {
	if plots > 0 {
		path += fmt.Sprintf(" and %d plots in %s", plots, filepath.Join(o.Dir, "img"))
	}
	log.Printf("wrote %s (%.0f s)", path, elapsed.Seconds())
}

// WriteJSON writes v, indented, to the JSON file, if there is one.
func (o Output) WriteJSON(v any) error {
	if o.JSON == "" {
		return nil
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(o.JSON, b, 0o644)
}

// MD builds markdown.
type MD struct{ strings.Builder }

// P appends the formatted text.
func (b *MD) P(format string, args ...any) { fmt.Fprintf(b, format, args...) }
