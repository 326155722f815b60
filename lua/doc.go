// Package lua is a building block of package rlock: it holds holdfast's
// server-side scripts and the names of the keys and channels they touch.
// Applications use rlock (Client, Mutex and the other locks), which calls these
// scripts with the bookkeeping they rely on, and never this package directly.
//
// Each operation is one embedded .lua file, headed by its KEYS/ARGV contract,
// and runs atomically in one round trip as EVALSHA, with EVAL when the server
// has lost its script cache. The Go functions here are typed wrappers: they
// build KEYS and ARGV from Go values (durations become milliseconds only here)
// and turn replies into Go values, so no []any leaks out.
//
// The files follow Redisson's objects:
//   - run.go: the runner shared by every family (EVALSHA with its EVAL
//     fallback, WAIT behind a script for Acks, the publish commands), the
//     helpers that encode arguments and read replies, and ScriptError, which
//     takes off the wrapping every server puts around an error raised inside a
//     script, each its own way; args.go: arguments boxed once (Text, Millis);
//     hashes.go: each script's SHA-1 digest, the name EVALSHA sends, recorded
//     rather than computed (GODEBUG=fips140=only refuses SHA-1), generated and
//     checked by TestScriptHashes (go generate ./lua).
//   - names.go: every Redisson key and channel name, of every object (locks,
//     RSemaphore, RPermitExpirableSemaphore, RCountDownLatch), and a name check
//     per family (CheckName for locks, CheckSemaphoreName,
//     CheckExpirableSemaphoreName, CheckLatchName); slot.go: Redis Cluster
//     slots.
//   - lock.go, lock_acquire.go, lock_release.go: the lock family (RLock and its
//     fenced, spin and non-reentrant forms, RFairLock, RReadWriteLock): the
//     Lock names and Layout, Acquire, Leave, Release, ReleaseAll, ForceRelease,
//     Inspect and LockShape.
//   - elect.go: holdfast's leader election on a fenced lock (rlock.Election):
//     the campaign (acquire.lua wrapped, then the leader record and the
//     announcement, in one script), Proclaim, Resign and Leader, and the
//     names of the leader record ({name}:leader) and the election's channel
//     (holdfast_election:{name}).
//   - renew.go: the watchdog's batched renewal of every kind of hold (Renewal,
//     RenewCmd, RenewResult, LoadRenew).
//   - sync.go and its prelude sync.lua: what the synchronizers' scripts share
//     (counts, reclaim, request keys that make a retried call count once);
//     semaphore.go (RSemaphore), permit.go (RPermitExpirableSemaphore: permits
//     with ids and leases), latch.go (RCountDownLatch).
//
// The lock path (Acquire, Release) is the hot path of every lock: its arguments
// that repeat from call to call are encoded once by the caller (Lock, Text,
// Millis), and each call sends one argument slice through the client's Process.
//
// The data layout is Redisson's RLock: the lock is a hash at the lock's name, each
// field an owner "<client uuid>:<owner id>" and its value the owner's hold count;
// unlock messages are "0" on redisson_lock__channel:{name}. Every key and channel a
// script touches is passed in KEYS and carries the same hash tag as the lock (see
// ChannelName), so the scripts work unchanged on Redis Cluster.
//
// Where holdfast adds to Redisson's scripts (an expected hold count that makes a
// retried call idempotent, a hand-off to a successor), the effect on the lock key
// stays one that Redisson clients understand.
package lua
