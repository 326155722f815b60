package integration

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/identity"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/stretchr/testify/require"
)

// TestIdentityRecord: a client that holds a lock keeps its record (service,
// host, pid, version, start) from its first hold, its tracker's connections
// carry its service in their names, and Close deletes the record; a client
// that holds nothing writes none.
func TestIdentityRecord(t *testing.T) {
	rdb, _, name := setup(t)
	ctx := testCtx(t, 20*time.Second)
	c, err := rlock.New(rdb, rlock.WithService("orders-svc"))
	require.NoError(t, err)
	idle := newClient(t, rdb)
	_, err = c.NewMutex(name).Lock(ctx)
	require.NoError(t, err)

	var got map[string]identity.Record
	require.Eventually(t, func() bool {
		got, err = identity.Read(ctx, rdb, c.ID(), idle.ID())
		return err == nil && len(got) == 1
	}, 5*time.Second, 5*time.Millisecond, "the holder's record is written, the idle client's is not")
	r := got[c.ID()]
	host, _ := os.Hostname()
	require.Equal(t, "orders-svc", r.Service)
	require.Equal(t, host, r.Host)
	require.Equal(t, os.Getpid(), r.PID)
	require.Equal(t, c.Identity(), r)
	require.Contains(t, r.String(), "orders-svc on "+host+", pid ")
	ttl := rdb.PTTL(ctx, identity.Key(c.ID())).Val()
	require.True(t, ttl > 0 && ttl <= identity.Life, "the record expires if the client dies: %v", ttl)

	require.Eventually(t, func() bool {
		return strings.Contains(rdb.ClientList(ctx).Val(), "name="+r.ConnName("watchdog")+":")
	}, 5*time.Second, 5*time.Millisecond, "the tracker's connections are named after the service")

	require.NoError(t, c.Close())
	got, err = identity.Read(ctx, rdb, c.ID())
	require.NoError(t, err)
	require.Empty(t, got, "Close deletes the record")
}
