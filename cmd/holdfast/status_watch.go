package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/term"
)

// The ways "holdfast status --watch" shows its refreshes (watchView.mode).
const (
	viewTerminal = iota // stdout is a terminal, no --json: each refresh redrawn in place
	viewText            // stdout is not a terminal, no --json: one block per refresh
	viewJSON            // --json: one JSON object per line and refresh
)

// The ANSI sequences of the terminal view.
const (
	ansiHome        = "\x1b[H"    // cursor to the top left corner
	ansiClearScreen = "\x1b[2J"   // erase the whole screen
	ansiEraseLine   = "\x1b[K"    // erase from the cursor to the end of the line
	ansiEraseBelow  = "\x1b[J"    // erase from the cursor to the end of the screen
	ansiHideCursor  = "\x1b[?25l" // hide the cursor while the view is redrawn
	ansiShowCursor  = "\x1b[?25h" // show it again
)

// watchTimeLayout is the time in the header of the terminal and text views.
const watchTimeLayout = "2006-01-02 15:04:05.000 -07:00"

// watchView writes the refreshes of a watch on out, as its mode says.
type watchView struct {
	out      io.Writer
	mode     int
	interval time.Duration
	scan     string // --scan's pattern, for the message when it finds nothing
	frames   int    // refreshes written so far
}

// watchObjects is the JSON line of a refresh that read every object: the
// objects as "holdfast status --json" prints them.
type watchObjects struct {
	Time    string         `json:"time"`
	Objects []objectStatus `json:"objects"`
}

// watchError is the JSON line of a refresh that Redis failed.
type watchError struct {
	Time  string `json:"time"`
	Error string `json:"error"`
}

// watchStatuses runs "holdfast status --watch": it reads and shows the objects
// of cfg every cfg.interval until ctx is cancelled (SIGINT, SIGTERM), then
// restores the terminal and returns exitOK. A Redis failure is shown and the
// next refresh tries again, except on the first refresh: a server that cannot
// be reached then ends the command as it ends plain status (exitUnavailable).
func watchStatuses(ctx context.Context, rdb redis.UniversalClient, cfg *statusConfig, io stdio) int {
	v := newWatchView(io.out, cfg)
	defer v.restore()
	tick := time.NewTicker(cfg.interval)
	defer tick.Stop()
	for {
		now := time.Now()
		list, err := statuses(ctx, rdb, cfg.targets, cfg.scan)
		switch {
		case ctx.Err() != nil:
			return exitOK
		case err != nil && v.frames == 0 && connFailure(err):
			return redisFailure(io, "status", err)
		}
		if werr := v.show(now, list, err); werr != nil {
			fmt.Fprintf(io.err, "holdfast status: cannot write the view: %v\n", werr)
			return exitSoftware
		}
		select {
		case <-ctx.Done():
			return exitOK
		case <-tick.C:
		}
	}
}

// newWatchView returns the view of cfg's watch on out: JSON lines with --json,
// else redrawn in place when out is a terminal, else plain text blocks.
func newWatchView(out io.Writer, cfg *statusConfig) *watchView {
	v := &watchView{out: out, mode: viewText, interval: cfg.interval, scan: cfg.scan}
	switch {
	case cfg.asJSON:
		v.mode = viewJSON
	case writesToTerminal(out):
		v.mode = viewTerminal
	}
	return v
}

// writesToTerminal reports whether out is a file open on a terminal.
func writesToTerminal(out io.Writer) bool {
	f, ok := out.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// show writes one refresh, read at now: list, or the error err that Redis
// gave instead. The refresh is written in one Write, so that a reader never
// sees half of one. It returns the error of that Write.
func (v *watchView) show(now time.Time, list []objectStatus, err error) error {
	var b bytes.Buffer
	switch v.mode {
	case viewJSON:
		writeWatchJSON(&b, now, list, err)
	case viewTerminal:
		b.WriteString(redrawn(v.block(now, list, err), v.frames == 0))
	default:
		if v.frames > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(v.block(now, list, err))
	}
	v.frames++
	_, werr := v.out.Write(b.Bytes())
	return werr
}

// block is the text of one refresh: a header line with the time and the
// interval, then what plain status prints, or the error of the refresh.
func (v *watchView) block(now time.Time, list []objectStatus, err error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "holdfast status, every %s: %s", v.interval, now.Format(watchTimeLayout))
	if v.mode == viewTerminal {
		b.WriteString("  (Ctrl-C to stop)")
	}
	b.WriteString("\n\n")
	if err != nil {
		fmt.Fprintf(&b, "error: %s (trying again in %s)\n", oneLine(err), v.interval)
		return b.String()
	}
	writeStatuses(&b, list, &statusConfig{scan: v.scan})
	return b.String()
}

// redrawn returns what redraws text in place on a terminal: the cursor home,
// each line followed by an erase to its end, then an erase of the rest of the
// screen, the cursor left at the end of the last line (a newline there would
// scroll a view as tall as the screen). The first refresh (first) also hides
// the cursor and clears the screen.
func redrawn(text string, first bool) string {
	var b strings.Builder
	if first {
		b.WriteString(ansiHideCursor + ansiHome + ansiClearScreen)
	}
	b.WriteString(ansiHome)
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for i, line := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(line + ansiEraseLine)
	}
	b.WriteString(ansiEraseBelow)
	return b.String()
}

// writeWatchJSON writes the JSON line of one refresh on w: the objects read at
// now, or the error err.
func writeWatchJSON(w io.Writer, now time.Time, list []objectStatus, err error) {
	at := now.UTC().Format(time.RFC3339Nano)
	enc := json.NewEncoder(w)
	if err != nil {
		_ = enc.Encode(watchError{Time: at, Error: oneLine(err)})
		return
	}
	_ = enc.Encode(watchObjects{Time: at, Objects: list})
}

// restore leaves the terminal as the watch found it: the cursor shown again,
// on a new line below the view. Other views need nothing.
func (v *watchView) restore() {
	if v.mode == viewTerminal && v.frames > 0 {
		_, _ = io.WriteString(v.out, "\n"+ansiShowCursor)
	}
}

// oneLine is err's message on one line.
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", " ")
}
