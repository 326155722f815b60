package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/holdfast-go/holdfast/observe"
)

// TestObservabilityDocListsEveryValue keeps the value tables of
// docs/observability.md equal to package observe's enums: each section lists
// every value, in order, and nothing else.
func TestObservabilityDocListsEveryValue(t *testing.T) {
	doc, err := os.ReadFile("../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	enums := []struct {
		section string
		values  []string
	}{
		{"### Kind", strs(observe.Kinds())},
		{"### Op", strs(observe.Ops())},
		{"### Outcome", upTo(func(i int) string { return observe.Outcome(i).String() })},
		{"### HoldOutcome", upTo(func(i int) string { return observe.HoldOutcome(i).String() })},
		{"### Cause", upTo(func(i int) string { return observe.Cause(i).String() })},
		{"### RenewOutcome", upTo(func(i int) string { return observe.RenewOutcome(i).String() })},
		{"### LossCause", upTo(func(i int) string { return observe.LossCause(i).String() })},
		{"### TrackingMode", upTo(func(i int) string { return observe.TrackingMode(i).String() })},
	}
	for _, e := range enums {
		rows := tableRows(string(doc), e.section)
		if strings.Join(rows, " ") != strings.Join(e.values, " ") {
			t.Errorf("docs/observability.md, %s: the table lists\n  %v\npackage observe has\n  %v", e.section, rows, e.values)
		}
	}
}

func strs[T fmt.Stringer](values []T) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = v.String()
	}
	return out
}

// upTo returns the values of an enum from 1 until its String is "unknown".
func upTo(str func(int) string) []string {
	var out []string
	for i := 1; str(i) != "unknown"; i++ {
		out = append(out, str(i))
	}
	return out
}

// tableRows returns the first cell (its code span) of each row of the first
// table after the heading that begins with section.
func tableRows(doc, section string) []string {
	_, rest, ok := strings.Cut(doc, "\n"+section+" ")
	if !ok {
		return nil
	}
	var rows []string
	inTable := false
	for line := range strings.SplitSeq(rest, "\n") {
		if strings.HasPrefix(line, "#") {
			break
		}
		if !strings.HasPrefix(line, "| `") {
			if inTable && !strings.HasPrefix(line, "|") {
				break
			}
			inTable = inTable || strings.HasPrefix(line, "|")
			continue
		}
		inTable = true
		cell, _, _ := strings.Cut(strings.TrimPrefix(line, "| `"), "`")
		rows = append(rows, cell)
	}
	return rows
}

// TestReadmeShowsClient keeps the README's OpenTelemetry wiring identical to
// client.go, which this module builds: the README's code compiles.
func TestReadmeShowsClient(t *testing.T) {
	src, err := os.ReadFile("client.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+string(src)+"```\n") {
		t.Errorf("README.md does not show examples/otel/client.go verbatim in a go code block: copy the file into it")
	}
}
