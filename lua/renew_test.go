package lua

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRenewalOf: each lock layout and a permit give the renewal of their kind,
// with the keys renew.lua expects (the read/write lock's timeout prefix, the
// permit-expirable semaphore's zset).
func TestRenewalOf(t *testing.T) {
	for _, tc := range []struct {
		got, want Renewal
	}{
		{NewLock("jobs").Renewal("u:1"), Renewal{Kind: RenewLockHold, Key: "jobs", Member: "u:1"}},
		{NewLayoutLock("jobs", LayoutFair).Renewal("u:1"), Renewal{Kind: RenewLockHold, Key: "jobs", Member: "u:1"}},
		{NewLayoutLock("jobs", LayoutWrite).Renewal("u:1:write"), Renewal{Kind: RenewLockHold, Key: "jobs", Member: "u:1:write"}},
		{NewLayoutLock("jobs", LayoutRead).Renewal("u:1"), Renewal{Kind: RenewReadHold, Key: "jobs", Member: "u:1", Prefix: "{jobs}"}},
		{NewLayoutLock("{t}:jobs", LayoutRead).Renewal("u:1"), Renewal{Kind: RenewReadHold, Key: "{t}:jobs", Member: "u:1", Prefix: "{t}:jobs"}},
		{PermitRenewal("sem", "\x00\xff"), Renewal{Kind: RenewPermit, Key: "{sem}:timeout", Member: "\x00\xff"}},
		{PermitRenewal("{t}:sem", "id"), Renewal{Kind: RenewPermit, Key: "{t}:sem:timeout", Member: "id"}},
		{NewPermit("sem").Renewal("\x00\xff"), PermitRenewal("sem", "\x00\xff")},
		{NewPermit("{t}:sem").Renewal("id"), PermitRenewal("{t}:sem", "id")},
	} {
		if tc.got != tc.want {
			t.Errorf("got %+v, want %+v", tc.got, tc.want)
		}
	}
}

// cmdArgsTest returns a pipeline that sends nothing, a time, and a renewal of
// each kind (a lock, a read lock, a permit) on "a".
func cmdArgsTest(t *testing.T) (redis.Pipeliner, time.Time, []Renewal) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // nothing is sent
	t.Cleanup(func() { rdb.Close() })
	return rdb.Pipeline(), time.UnixMilli(1_700_000_000_000), []Renewal{
		NewLock("a").Renewal("u:1"),
		NewLayoutLock("a", LayoutRead).Renewal("u:2"),
		PermitRenewal("a", "id"),
	}
}

// TestRenewCmdArgs pins renew.lua's arguments: the lease, now and now + lease
// in ms, whether to read the keys again, then kind, member and prefix per key.
func TestRenewCmdArgs(t *testing.T) {
	p, now, rs := cmdArgsTest(t)
	cmd := RenewCmd(context.Background(), p, rs, now, 30*time.Second, true)
	want := []any{"evalsha", renewScript.sha, 3, "a", "a", "{a}:timeout",
		int64(30000), int64(1_700_000_000_000), int64(1_700_000_030_000), "1",
		"lock", "u:1", "", "read", "u:2", "{a}", "permit", "id", ""}
	if got := cmd.Args(); !reflect.DeepEqual(got, want) {
		t.Errorf("args\n got %#v\nwant %#v", got, want)
	}
}

// TestCheckCmdArgs pins check.lua's arguments: now in ms, then kind and member
// per key.
func TestCheckCmdArgs(t *testing.T) {
	p, now, rs := cmdArgsTest(t)
	cmd := CheckCmd(context.Background(), p, rs, now)
	want := []any{"evalsha", checkScript.sha, 3, "a", "a", "{a}:timeout",
		int64(1_700_000_000_000), "lock", "u:1", "read", "u:2", "permit", "id"}
	if got := cmd.Args(); !reflect.DeepEqual(got, want) {
		t.Errorf("args\n got %#v\nwant %#v", got, want)
	}
}
