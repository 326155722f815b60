package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/holdfast-go/holdfast/rlock"
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
			"force-release lock job, held by client 3edaecd7-8b5a-4c47-bdc6-fff775044369, owner 82 (no record)  count 1? [y/N]"), errOut.String())
		require.Equal(t, tc.code != exitOK, mr.Exists("job"), tc.answer)
	}
}

// TestPermitsOf: a permit-expirable semaphore's zset members become ids (16
// raw bytes as 32 lowercase hex characters, older Redisson's hex text as it
// is) with their expiries on this machine's clock, or no lease.
func TestPermitsOf(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	raw := string([]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0xff})
	ps := permitsOf([]redis.Z{
		{Score: 998_000, Member: raw},
		{Score: 1_030_000, Member: "00112233445566778899aabbccddeeff"},
		{Score: noLeaseScore, Member: "\x00\x01"},
	}, now)
	require.Len(t, ps, 3)
	require.Equal(t, "0123456789abcdef00102030405060ff", ps[0].ID)
	require.EqualValues(t, 998_000, *ps[0].ExpiryUnixMillis)
	require.EqualValues(t, -2000, *ps[0].ExpiresInMillis)
	require.Contains(t, permitLease(ps[0]), "lease ran out 2s ago")
	require.Equal(t, "00112233445566778899aabbccddeeff", ps[1].ID, "Redisson < 3.17 stored the hex text")
	require.Equal(t, "lease 30s left", permitLease(ps[1]))
	require.Equal(t, permit{ID: "0001", NoLease: true}, ps[2])
	require.Equal(t, "no lease", permitLease(ps[2]))
}

// TestClassifyCounters: an integer string is a permit-expirable semaphore
// when permits are acquired in its zset, else what the user named it
// (--semaphore, --latch), else "semaphore_or_latch" with both channels; a
// named kind without a key shows as that kind, with its channel.
func TestClassifyCounters(t *testing.T) {
	now := time.Now()
	str := snapshot{typ: "string", value: "2", pttl: -1}
	for as, want := range map[string]objectStatus{
		"":        {Kind: kindCounter, Channel: "redisson_sc:{n}", LatchChannel: "redisson_countdownlatch__channel__{n}"},
		kindSema:  {Kind: kindSema, Channel: "redisson_sc:{n}"},
		kindLatch: {Kind: kindLatch, Channel: "redisson_countdownlatch__channel__{n}"},
	} {
		st := classify("n", as, str, now)
		require.Equal(t, []string{want.Kind, want.Channel, want.LatchChannel, "2"}, []string{st.Kind, st.Channel, st.LatchChannel, st.Value}, as)
	}
	pes := str
	pes.permits, pes.permitSet = 1, []redis.Z{{Score: noLeaseScore, Member: "0123456789abcdef"}}
	for _, as := range []string{"", kindSema, kindLatch} {
		st := classify("n", as, pes, now)
		require.Equal(t, kindPermits, st.Kind, "the zset says what it is, whatever the user said")
		require.EqualValues(t, 1, st.AcquiredPermits)
		require.Equal(t, []permit{{ID: "30313233343536373839616263646566", NoLease: true}}, st.Permits)
	}
	none := snapshot{typ: "none", pttl: -2}
	require.Equal(t, kindFree, classify("n", "", none, now).Kind)
	st := classify("n", kindLatch, none, now)
	require.Equal(t, []string{kindLatch, "redisson_countdownlatch__channel__{n}"}, []string{st.Kind, st.Channel})
	st = classify("n", kindSema, none, now)
	require.Equal(t, []string{kindSema, "redisson_sc:{n}"}, []string{st.Kind, st.Channel})
	require.Equal(t, kindNotALock, classify("n", kindLatch, snapshot{typ: "string", value: "x"}, now).Kind)

	// A latch's key is deleted at 0: a count of 0 or less is a semaphore's.
	for _, v := range []string{"0", "-3"} {
		st = classify("n", "", snapshot{typ: "string", value: v, pttl: -1}, now)
		require.Equal(t, []string{kindSema, "redisson_sc:{n}", ""}, []string{st.Kind, st.Channel, st.LatchChannel}, v)
	}
	// Its channels' subscribers show what an integer is used as.
	for _, tc := range []struct {
		sem, latch int64
		want       string
	}{{0, 0, ""}, {2, 0, kindSema}, {0, 1, kindLatch}, {1, 1, ""}} {
		require.Equal(t, tc.want, seenAs(objectStatus{Kind: kindCounter, Subscribers: tc.sem, LatchSubscribers: tc.latch}))
	}
}

// TestWriteHumanCounters: the human blocks of semaphores and latches.
func TestWriteHumanCounters(t *testing.T) {
	in := int64(12_000)
	at := int64(1_700_000_000_000)
	for _, tc := range []struct {
		st   objectStatus
		want string
	}{
		{objectStatus{Name: "jobs", Kind: kindPermits, RedisType: "string", TTLMillis: -1, Value: "0", AcquiredPermits: 3,
			Channel: "redisson_sc:{jobs}", Subscribers: 1,
			Permits: []permit{{ID: "aa", ExpiryUnixMillis: &at, ExpiresInMillis: &in}, {ID: "bb", NoLease: true}}},
			"jobs: permit-expirable semaphore: 0 available, 3 acquired\n" +
				"  permits:  3 acquired, earliest expiry first\n" +
				"    aa  lease 12s left\n" +
				"    bb  no lease\n" +
				"    and 1 more\n" +
				"  waiters:  1 subscribed to redisson_sc:{jobs}\n"},
		{objectStatus{Name: "done", Kind: kindLatch, RedisType: "string", TTLMillis: -1, Value: "3",
			Channel: "redisson_countdownlatch__channel__{done}", Subscribers: 5},
			"done: countdown latch: count 3\n  awaiters: 5 subscribed to redisson_countdownlatch__channel__{done}\n"},
		{objectStatus{Name: "done", Kind: kindLatch, RedisType: "none", TTLMillis: -2, Channel: "redisson_countdownlatch__channel__{done}"},
			"done: countdown latch: open (no key: counted down, or never set)\n  awaiters: 0 subscribed to redisson_countdownlatch__channel__{done}\n"},
		{objectStatus{Name: "s", Kind: kindSema, RedisType: "string", TTLMillis: 5000, Value: "4", Channel: "redisson_sc:{s}", Subscribers: 2},
			"s: semaphore: 4 available\n  expiry:   5s left\n  waiters:  2 subscribed to redisson_sc:{s}\n"},
		{objectStatus{Name: "c", Kind: kindCounter, RedisType: "string", TTLMillis: -1, Value: "4", Channel: "redisson_sc:{c}",
			LatchChannel: "redisson_countdownlatch__channel__{c}"},
			"c: semaphore or latch: value 4\n" +
				"  reading:  a semaphore with 4 permits free and none acquired, or a countdown latch at count 4: " +
				"Redis keeps nothing else that tells them apart (name it with --semaphore or --latch)\n" +
				"  waiters:  0 subscribed to redisson_sc:{c}, 0 to redisson_countdownlatch__channel__{c}\n"},
		{objectStatus{Name: "c", Kind: kindCounter, RedisType: "string", TTLMillis: -1, Value: "4", Channel: "redisson_sc:{c}",
			LatchChannel: "redisson_countdownlatch__channel__{c}", Subscribers: 2, SeenAs: kindSema},
			"c: semaphore or latch: value 4, waited on as a semaphore\n" +
				"  reading:  a semaphore with 4 permits available: 2 client(s) wait for permits, none awaits a latch\n" +
				"  waiters:  2 subscribed to redisson_sc:{c}, 0 to redisson_countdownlatch__channel__{c}\n"},
		{objectStatus{Name: "s", Kind: kindSema, RedisType: "none", TTLMillis: -2, Channel: "redisson_sc:{s}"},
			"s: semaphore: no key (0 available: never initialised, or deleted)\n  waiters:  0 subscribed to redisson_sc:{s}\n"},
	} {
		var b bytes.Buffer
		writeHuman(&b, tc.st)
		require.Equal(t, tc.want, b.String())
	}
}

// TestParseStatusKinds: --semaphore and --latch name targets of their kind,
// in the order given among the plain names, and are checked by the library's
// rule for that kind.
func TestParseStatusKinds(t *testing.T) {
	cfg, _, err := parseStatus([]string{"a", "--latch", "b", "c", "--semaphore", "d", "--json"})
	require.NoError(t, err)
	require.True(t, cfg.asJSON)
	require.Equal(t, []target{{"a", ""}, {"b", kindLatch}, {"c", ""}, {"d", kindSema}}, cfg.targets)

	// A latch's channel wraps the whole name in braces: "{t}:x" is refused for
	// a latch, accepted for a lock; "a{b" the other way round.
	require.ErrorContains(t, checkName(kindLatch, "{t}:x"), `rlock: invalid argument: latch name "{t}:x": `)
	require.NoError(t, checkName("", "{t}:x"))
	require.NoError(t, checkName(kindLatch, "a{b"))
	require.ErrorIs(t, checkName("", "a{b"), rlock.ErrInvalidArgument)
	require.ErrorIs(t, checkName(kindSema, "a{b"), rlock.ErrInvalidArgument)
	require.ErrorIs(t, checkName(kindPermits, "a}b"), rlock.ErrInvalidArgument)

	var out, errOut bytes.Buffer
	io := stdio{out: &out, err: &errOut, env: func(string) string { return "" }}
	require.Equal(t, exitUsage, statusCommand(context.Background(), []string{"--redis", "redis://127.0.0.1:1", "--latch", "{t}:x"}, io))
	require.True(t, strings.HasPrefix(errOut.String(), `holdfast status: rlock: invalid argument: latch name "{t}:x": `), errOut.String())
}

// TestStatusCountersMiniredis: status reads a permit-expirable semaphore's
// permits, and names the kind of an integer string as the user says.
func TestStatusCountersMiniredis(t *testing.T) {
	mr := miniredis.RunT(t)
	require.NoError(t, mr.Set("jobs", "1"))
	id := []byte{0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	_, err := mr.ZAdd("{jobs}:timeout", noLeaseScore, string(id))
	require.NoError(t, err)
	require.NoError(t, mr.Set("done", "2"))
	var out, errOut bytes.Buffer
	io := stdio{out: &out, err: &errOut, env: func(string) string { return "" }}
	args := []string{"--redis", "redis://" + mr.Addr(), "jobs", "--latch", "done", "--json"}
	require.Equal(t, exitOK, statusCommand(context.Background(), args, io), errOut.String())
	var list []objectStatus
	require.NoError(t, json.Unmarshal(out.Bytes(), &list))
	require.Len(t, list, 2)
	require.Equal(t, kindPermits, list[0].Kind)
	require.Equal(t, []permit{{ID: "deadbeef000102030405060708090a0b", NoLease: true}}, list[0].Permits)
	require.Contains(t, out.String(), `"no_lease": true`)
	require.Equal(t, []string{kindLatch, "2", "redisson_countdownlatch__channel__{done}"}, []string{list[1].Kind, list[1].Value, list[1].Channel})
}

// TestUnlockPermitUsage: --permit takes 32 hex characters, in either case; a
// malformed id is a usage error in two lines and --permit without --force is
// refused in one line, both before any connection.
func TestUnlockPermitUsage(t *testing.T) {
	id, err := parsePermitID("0123456789ABCDEF0123456789abcdef")
	require.NoError(t, err)
	require.Equal(t, "0123456789abcdef0123456789abcdef", id)
	for _, bad := range []string{"", "0123", "0123456789abcdef0123456789abcdeg", "0123456789abcdef0123456789abcdef00"} {
		_, err := parsePermitID(bad)
		require.ErrorContains(t, err, "a permit id is 32 hexadecimal characters", bad)
	}
	var out, errOut bytes.Buffer
	io := stdio{out: &out, err: &errOut, env: func(string) string { return "" }}
	closed := "redis://127.0.0.1:1"
	require.Equal(t, exitUsage, unlockCommand(context.Background(), []string{"--force", "--redis", closed, "--permit", "xyz", "jobs"}, io))
	require.Equal(t, "holdfast unlock: --permit \"xyz\": a permit id is 32 hexadecimal characters (holdfast status NAME lists them)\n"+
		"run 'holdfast unlock -h' for usage\n", errOut.String())
	errOut.Reset()
	require.Equal(t, exitUsage, unlockCommand(context.Background(), []string{"--redis", closed, "jobs", "--permit", id}, io))
	require.Equal(t, "holdfast unlock: refusing to release permit "+id+" of \"jobs\" without --force: its holder is not told "+
		"(see the permits with: holdfast status jobs)\n", errOut.String())
	require.Empty(t, out.String())
}

// TestUnlockPermitMiniredis: unlock --force --permit releases a held permit
// (its zset member goes, the available count goes up); a permit not held is
// "nothing to release" (exit 0); a lock's hash is left alone (exit 65); a
// semaphore without --permit is refused with the hint (exit 65).
func TestUnlockPermitMiniredis(t *testing.T) {
	mr := miniredis.RunT(t)
	require.NoError(t, mr.Set("jobs", "0"))
	raw := []byte{0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	id := "deadbeef000102030405060708090a0b"
	_, err := mr.ZAdd("{jobs}:timeout", noLeaseScore, string(raw))
	require.NoError(t, err)
	mr.HSet("lock", "3edaecd7-8b5a-4c47-bdc6-fff775044369:82", "1")
	url := "redis://" + mr.Addr()
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		io := stdio{out: &out, err: &errOut, env: func(string) string { return "" }}
		code := unlockCommand(context.Background(), append([]string{"--force", "--redis", url}, args...), io)
		return code, out.String(), errOut.String()
	}
	code, _, stderr := run("jobs")
	require.Equal(t, exitDataErr, code)
	require.Contains(t, stderr, "release one of its permits with --permit ID")

	code, stdout, stderr := run("--permit", id, "jobs")
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, "force-released permit "+id+" of jobs (no lease); announced on redisson_sc:{jobs} (0 subscribed)\n", stdout)
	v, err := mr.Get("jobs")
	require.NoError(t, err)
	require.Equal(t, "1", v, "the permit went back to the pool")
	require.False(t, mr.Exists("{jobs}:timeout"))

	code, stdout, _ = run("--permit", id, "jobs")
	require.Equal(t, exitOK, code)
	require.Contains(t, stdout, "is not held in jobs: nothing to release")

	code, _, stderr = run("--permit", id, "lock")
	require.Equal(t, exitDataErr, code)
	require.Contains(t, stderr, "holdfast unlock: lock: locked (RLock layout")
	require.True(t, mr.Exists("lock"))
}
