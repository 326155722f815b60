package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
)

// TestShipOrder runs the README's first example against an embedded Redis: it
// takes the lock, runs the work under a live ctx and leaves the lock free.
func TestShipOrder(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	c, err := rlock.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
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
	src, err := os.ReadFile("lock.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, fn, ok := strings.Cut(string(src), "\n\nfunc shipOrder(")
	if !ok || !strings.Contains(string(readme), "```go\nfunc shipOrder("+fn+"```\n") {
		t.Errorf("README.md does not show lock.go's func shipOrder verbatim in a go code block: copy it")
	}
}
