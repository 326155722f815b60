package main

import (
	"bytes"
	"context"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestSplitField: owner fields split into client id and owner id, the write
// suffix apart.
func TestSplitField(t *testing.T) {
	for _, tc := range []struct{ field, client, owner string }{
		{"3edaecd7-8b5a-4c47-bdc6-fff775044369:82", "3edaecd7-8b5a-4c47-bdc6-fff775044369", "82"},
		{"3edaecd7-8b5a-4c47-bdc6-fff775044369:82:write", "3edaecd7-8b5a-4c47-bdc6-fff775044369", "82"},
		{"noowner", "noowner", ""},
	} {
		c, o, w := splitField(tc.field)
		require.Equal(t, []string{tc.client, tc.owner}, []string{c, o}, tc.field)
		require.Equal(t, strings.HasSuffix(tc.field, ":write"), w, tc.field)
	}
}

// TestParseHolders: a lock hash gives its holders, writer first. (Which hashes
// are locks is lua.LockShape's rule, tested against Redis in integration.)
func TestParseHolders(t *testing.T) {
	hs, mode := parseHolders(map[string]string{"mode": "write", "a:1": "1", "a:1:write": "2"})
	require.Equal(t, "write", mode)
	require.Equal(t, []holder{
		{Field: "a:1:write", ClientID: "a", OwnerID: "1", Side: "write", Count: 2},
		{Field: "a:1", ClientID: "a", OwnerID: "1", Side: "read", Count: 1},
	}, hs)
}

// TestObjectOf: auxiliary keys lead back to their object's name.
func TestObjectOf(t *testing.T) {
	for key, name := range map[string]string{
		"redisson_lock_queue:{orders:42}":                "orders:42",
		"redisson_lock_timeout:{orders:42}":              "orders:42",
		"redisson_lock_token:{orders:42}":                "orders:42",
		"redisson_lock_token:acc:{7}:x":                  "acc:{7}:x",
		"{cfg}:3eda-ff:82:rwlock_timeout:1":              "cfg",
		"{a:b}:3eda-ff:82:rwlock_timeout:12":             "a:b",
		"acc:{7}:x:3eda-ff:82:rwlock_timeout:1":          "acc:{7}:x",
		"{perm}:timeout":                                 "perm",
		"redisson_lock_queue:{{t}}":                      "{{t}}",
		"redisson_lock__channel:{x}":                     "",
		"orders:42":                                      "",
		"plain:timeout":                                  "",
		"redisson_unlock_latch:{x}:0123456789abcdef0123": "",
	} {
		got, ok := objectOf(key)
		require.Equal(t, name != "", ok, key)
		require.Equal(t, name, got, key)
	}
}

// TestQueueOf: the queue keeps its order and gets its deadlines from the zset.
func TestQueueOf(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	q := queueOf("n", []string{"b:2", "a:1"}, []redis.Z{{Score: 1_005_000, Member: "a:1"}, {Score: 1_002_000, Member: "b:2"}}, now)
	require.Len(t, q, 2)
	require.Equal(t, "b:2", q[0].Field)
	require.EqualValues(t, 2000, *q[0].DeadlineInMillis)
	require.EqualValues(t, 5000, *q[1].DeadlineInMillis)
	require.Equal(t, "redisson_lock__channel:{n}:b:2", q[0].Channel)
	require.Contains(t, queuedLine(q[0]), "deadline in 2s")
}

// TestSummarize: read timeout keys are counted with their shortest TTL.
func TestSummarize(t *testing.T) {
	cmds := func(ttls ...int64) []*redis.Cmd {
		var cs []*redis.Cmd
		for _, v := range ttls {
			c := redis.NewCmd(context.Background())
			c.SetVal(v)
			cs = append(cs, c)
		}
		return cs
	}
	require.Equal(t, &readTimeouts{Keys: 2, MinTTLMillis: 500}, summarize(cmds(900, -2, 500)))
	require.Equal(t, &readTimeouts{Keys: 2, MinTTLMillis: 900}, summarize(cmds(-1, 900)))
	require.Equal(t, &readTimeouts{Keys: 1, MinTTLMillis: -1}, summarize(cmds(-1)))
	require.Equal(t, &readTimeouts{Keys: 0, MinTTLMillis: -2}, summarize(cmds(-2)))
}

// TestParseInterspersed: flags may follow the names; "--" ends the flags.
func TestParseInterspersed(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	force := fs.Bool("force", false, "")
	names, err := parseInterspersed(fs, []string{"a", "--force", "b", "--", "--c"})
	require.NoError(t, err)
	require.True(t, *force)
	require.Equal(t, []string{"a", "b", "--c"}, names)
}

// TestUnlockConfirm: on a terminal unlock asks first: "n" (or nothing) leaves
// the lock held (exit 1), "y" releases it; --yes does not ask.
func TestUnlockConfirm(t *testing.T) {
	mr := miniredis.RunT(t)
	for _, tc := range []struct {
		answer string
		args   []string
		code   int
		asked  bool
	}{
		{"n\n", nil, exitBusy, true},
		{"", nil, exitBusy, true},
		{"y\n", nil, exitOK, true},
		{"", []string{"--yes"}, exitOK, false},
	} {
		mr.HSet("job", "3edaecd7-8b5a-4c47-bdc6-fff775044369:82", "1")
		var out, errOut bytes.Buffer
		io := stdio{in: strings.NewReader(tc.answer), out: &out, err: &errOut, env: func(string) string { return "" }, interactive: true}
		args := append([]string{"--force", "--redis", "redis://" + mr.Addr(), "job"}, tc.args...)
		require.Equal(t, tc.code, unlockCommand(context.Background(), args, io), "%q: %s", tc.answer, errOut.String())
		require.Equal(t, tc.asked, strings.Contains(errOut.String(),
			"force-release lock job held by client 3edaecd7-8b5a-4c47-bdc6-fff775044369 owner 82 (count 1)? [y/N]"), errOut.String())
		require.Equal(t, tc.code != exitOK, mr.Exists("job"), tc.answer)
	}
}
