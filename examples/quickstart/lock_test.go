package main

import (
	"context"
	"testing"
)

// TestShipOrder runs the README's first example against an embedded Redis: it
// takes the lock, runs the work under a live ctx and leaves the lock free.
func TestShipOrder(t *testing.T) {
	mr, c := newTestClient(t)
	if err := shipOrder(context.Background(), c); err != nil {
		t.Fatalf("shipOrder: %v", err)
	}
	if mr.Exists("orders:42") {
		t.Errorf("the lock key is still there after shipOrder: %v", mr.Keys())
	}
}

// TestReadmeShowsLock keeps the README's first example identical to lock.go,
// from its func shipOrder on.
func TestReadmeShowsLock(t *testing.T) {
	readmeShows(t, "lock.go", "shipOrder")
}
