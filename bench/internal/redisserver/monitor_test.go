package redisserver

import (
	"slices"
	"testing"
)

func TestParseMonitorLine(t *testing.T) {
	c, ok := ParseMonitorLine(`+1700000000.123456 [0 lua] "decrby" "k \"q\"" "1"`)
	if !ok || c.T != 1700000000123456000 || !c.Script || !slices.Equal(c.Args, []string{"decrby", `k "q"`, "1"}) {
		t.Errorf("lua line: %+v, %v", c, ok)
	}
	c, ok = ParseMonitorLine(`+1700000000.000001 [0 127.0.0.1:5000] "PING"`)
	if !ok || c.Script || !slices.Equal(c.Args, []string{"PING"}) {
		t.Errorf("client line: %+v, %v", c, ok)
	}
	if _, ok := ParseMonitorLine("+OK"); ok {
		t.Error("+OK parsed as a command")
	}
}
