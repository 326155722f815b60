package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/redis/go-redis/v9"
)

// scanBatch is the COUNT hint of each SCAN call.
const scanBatch = 1000

// Prefixes of the keys that name a lock besides its own key (lua/names.go).
var auxPrefixes = []string{"redisson_lock_queue:", "redisson_lock_timeout:", "redisson_lock_token:"}

// scanNames returns, sorted, the names of the objects that keys matching pattern
// may belong to: hashes (lock candidates) and the names that auxiliary keys (a
// fair lock's queue and deadlines, a fencing token, read timeout keys, a
// permit-expirable semaphore's permits) were derived from. The caller keeps
// those that inspect shows as lock objects. On a Cluster every primary is
// scanned.
func scanNames(ctx context.Context, rdb redis.UniversalClient, pattern string) ([]string, error) {
	set := make(map[string]bool)
	var mu sync.Mutex
	scan := func(ctx context.Context, node *redis.Client) error {
		names, err := scanNode(ctx, node, pattern)
		mu.Lock()
		defer mu.Unlock()
		for _, n := range names {
			set[n] = true
		}
		return err
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		err = fmt.Errorf("--scan: unsupported client %T", rdb)
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// scanNode SCANs one server for keys matching pattern and returns the object
// names they suggest (see scanNames).
func scanNode(ctx context.Context, node *redis.Client, pattern string) ([]string, error) {
	var names []string
	var cursor uint64
	for {
		keys, next, err := node.Scan(ctx, cursor, pattern, scanBatch).Result()
		if err != nil {
			return names, err
		}
		var others []string
		for _, k := range keys {
			if n, ok := objectOf(k); ok {
				names = append(names, n)
			} else {
				others = append(others, k)
			}
		}
		hashes, err := hashesAmong(ctx, node, others)
		names = append(names, hashes...)
		if err != nil || next == 0 {
			return names, err
		}
		cursor = next
	}
}

// hashesAmong returns the keys of keys that hold a hash, in one round trip.
func hashesAmong(ctx context.Context, node *redis.Client, keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	types := make([]*redis.StatusCmd, len(keys))
	_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			types[i] = p.Type(ctx, k)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var hashes []string
	for i, t := range types {
		if t.Val() == "hash" {
			hashes = append(hashes, keys[i])
		}
	}
	return hashes, nil
}

// objectOf returns the name of the object that the auxiliary key k belongs to,
// by Redisson's naming rules: redisson_lock_queue:{N}, redisson_lock_timeout:{N},
// redisson_lock_token:{N}, {N}:<field>:rwlock_timeout:<k>, {N}:timeout
// (lua.PermitTimeoutsName), and the forms without braces of names that have a
// '{'. A name N that is itself "{X}" has the same auxiliary keys as X: objectOf
// answers X.
func objectOf(k string) (string, bool) {
	for _, p := range auxPrefixes {
		if rest, ok := strings.CutPrefix(k, p); ok && rest != "" {
			return untag(rest), true
		}
	}
	if i := strings.LastIndex(k, ":rwlock_timeout:"); i >= 0 {
		parts := strings.Split(k[:i], ":")
		if len(parts) >= 3 { // <name>:<client id>:<owner id>
			return untag(strings.Join(parts[:len(parts)-2], ":")), true
		}
	}
	if base, ok := strings.CutSuffix(k, lua.PermitTimeoutsSuffix); ok && strings.Contains(base, "{") {
		return untag(base), true
	}
	return "", false
}

// untag undoes Redisson's hash tag around a name: "{N}" is N when N has no
// braces; any other text is the name itself (which has a '{').
func untag(s string) string {
	if inner, ok := strings.CutPrefix(s, "{"); ok {
		if inner, ok := strings.CutSuffix(inner, "}"); ok && !strings.ContainsAny(inner, "{}") {
			return inner
		}
	}
	return s
}

// shownByScan reports whether --scan shows st: a lock object (or a semaphore
// found through its permits), or a free name that still has a fencing token.
func shownByScan(st objectStatus) bool {
	switch st.Kind {
	case kindNotALock:
		return false
	case kindFree:
		return st.FencingToken != nil
	}
	return true
}
