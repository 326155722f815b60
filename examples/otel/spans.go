package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// spanCounter is a span processor that stands in for a trace exporter: it
// counts holdfast's spans by name, those with an error status, and the
// go-redis command spans started under one of them.
type spanCounter struct {
	mu       sync.Mutex
	open     map[trace.SpanID]bool // holdfast spans started, not ended
	ended    map[string]int        // holdfast spans ended, by name
	errors   int                   // of which with an error status
	commands int                   // other spans (redisotel's) whose parent is a holdfast span
}

func newSpanCounter() *spanCounter {
	return &spanCounter{open: map[trace.SpanID]bool{}, ended: map[string]int{}}
}

func isHoldfast(s sdktrace.ReadOnlySpan) bool { return strings.HasPrefix(s.Name(), "holdfast.") }

func (c *spanCounter) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if isHoldfast(s) {
		c.open[s.SpanContext().SpanID()] = true
	} else if c.open[s.Parent().SpanID()] {
		c.commands++
	}
}

func (c *spanCounter) OnEnd(s sdktrace.ReadOnlySpan) {
	if !isHoldfast(s) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.open, s.SpanContext().SpanID())
	c.ended[s.Name()]++
	if s.Status().Code == codes.Error {
		c.errors++
	}
}

func (c *spanCounter) Shutdown(context.Context) error   { return nil }
func (c *spanCounter) ForceFlush(context.Context) error { return nil }

// print writes the counts as comment lines, which the Prometheus text format
// allows.
func (c *spanCounter) print(out io.Writer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := make([]string, 0, len(c.ended))
	for name := range c.ended {
		names = append(names, name)
	}
	slices.Sort(names)
	fmt.Fprintf(out, "# spans (counted, not exported): %d go-redis command spans under holdfast spans; %d holdfast spans with an error status\n", c.commands, c.errors)
	for _, name := range names {
		fmt.Fprintf(out, "# span %s %d\n", name, c.ended[name])
	}
}
