package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseElect(t *testing.T) {
	cfg, _, err := parseElect([]string{"--value", "a", "-w", "3s", "-E", "9", "--watchdog-timeout", "2s", "reports", "--", "sh", "-c", "exit 0"})
	require.NoError(t, err)
	require.True(t, cfg.elect)
	require.Equal(t, "elect", cfg.cmd())
	require.Equal(t, "a", cfg.value)
	require.Equal(t, "reports", cfg.name)
	require.Equal(t, []string{"sh", "-c", "exit 0"}, cfg.argv)
	require.Equal(t, 3*time.Second, cfg.wait)
	require.Equal(t, 9, cfg.busyCode)
	require.Equal(t, 2*time.Second, cfg.watchdog)

	cfg, _, err = parseElect([]string{"reports"})
	require.NoError(t, err)
	require.Contains(t, cfg.value, ":", "the default value is HOST:PID")
	require.Empty(t, cfg.argv)

	for _, args := range [][]string{{}, {"-w", "0", "reports"}, {"-n", "reports"}, {"reports", "sh"}} {
		_, _, err := parseElect(args)
		require.Error(t, err, strings.Join(args, " "))
	}
}
