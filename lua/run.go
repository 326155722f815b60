package lua

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"time"

	"github.com/redis/go-redis/v9"
)

// Processor sends a command: a go-redis client of any kind, or a pipeline.
type Processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// script is one of holdfast's scripts: its source and its SHA-1 digest, the
// name EVALSHA knows it by. The digest is not computed here: it is the
// constant recorded for the script in hashes.go (scriptSHA), which
// TestScriptHashes checks against the source and rewrites with -update, so
// that no SHA-1 is computed in the process (crypto/sha1 panics under
// GODEBUG=fips140=only; redis.NewScript hashes, so it is not used). Unlike
// redis.Script.Run, run sends the caller's argument slice as it is: one
// allocation for the arguments, one for the command.
type script struct {
	sha, src any // boxed once: EVALSHA's and EVAL's second argument
}

// scriptSources is every script made by newScript, by name: what
// TestScriptHashes hashes.
var scriptSources = map[string]string{}

// newScript returns the script name (its .lua file, without the extension)
// with the source src, and its digest from scriptSHA. A script missing from
// scriptSHA gets the digest "", which no server knows: it runs, as EVAL every
// time, and TestScriptHashes fails.
func newScript(name, src string) script {
	if _, dup := scriptSources[name]; dup {
		panic("lua: two scripts named " + name)
	}
	scriptSources[name] = src
	return script{sha: scriptSHA[name], src: src}
}

// runScripter runs the script on c as redis.Script.Run does: EVALSHA, and
// EVAL when the server answers NOSCRIPT.
func (s script) runScripter(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	cmd := c.EvalSha(ctx, s.sha.(string), keys, args...)
	if IsNoScript(cmd.Err()) {
		return c.Eval(ctx, s.src.(string), keys, args...)
	}
	return cmd
}

// evalSha queues the script on p as EVALSHA.
func (s script) evalSha(ctx context.Context, p redis.Scripter, keys []string, args ...any) *redis.Cmd {
	return p.EvalSha(ctx, s.sha.(string), keys, args...)
}

// load loads the script into the server's script cache (SCRIPT LOAD), and
// fails if the server names it by another digest than the recorded one.
func (s script) load(ctx context.Context, c redis.Scripter) error {
	got, err := c.ScriptLoad(ctx, s.src.(string)).Result()
	if err != nil {
		return err
	}
	if got != s.sha {
		return fmt.Errorf("lua: the server names a script %s, holdfast recorded %q (hashes.go is stale)", got, s.sha)
	}
	return nil
}

// call sends args (see run), followed by WAIT when acks asks for replicas
// (runAcked), and returns the reply and the replicas that acknowledged.
func (s script) call(ctx context.Context, rdb Processor, args []any, acks Acks) (any, int, error) {
	if acks.Replicas > 0 {
		return s.runAcked(ctx, rdb, args, acks)
	}
	v, err := s.run(ctx, rdb, args)
	return v, 0, err
}

// run sends args, which must begin with two placeholders and the number of keys,
// as EVALSHA, and as EVAL when the server has not cached the script.
func (s script) run(ctx context.Context, rdb Processor, args []any) (any, error) {
	args[0], args[1] = "evalsha", s.sha
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	_ = rdb.Process(ctx, cmd)
	if IsNoScript(cmd.Err()) {
		args[0], args[1] = "eval", s.src
		cmd = redis.NewCmd(ctx, args...)
		cmd.SetFirstKeyPos(3)
		_ = rdb.Process(ctx, cmd)
	}
	v, err := cmd.Result()
	return v, ScriptError(err)
}

// Acks asks that a script's writes reach Replicas replicas before the call
// returns, waiting at most Timeout: WAIT, sent behind the script in the same
// round trip on the same connection (Redisson's checkLockSyncedSlaves). The zero
// Acks asks for none.
type Acks struct {
	Replicas int
	Timeout  time.Duration
}

// pipeliner is a client that can send a pipeline on one connection.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

// runAcked sends the script with args and then WAIT in one pipeline, on a
// connection to the primary that owns the script's first key, and returns the
// script's reply and how many replicas acknowledged. A WAIT that fails after the
// script answered counts no acknowledgement.
func (s script) runAcked(ctx context.Context, rdb Processor, args []any, acks Acks) (any, int, error) {
	return s.runAckedThen(ctx, rdb, args, acks, nil)
}

// runAckedThen is runAcked with the command then (its arguments; nil: none)
// sent between the script and WAIT, in the same pipeline: a write of a key in
// the script's slot that moves the connection's replication offset, which
// WAIT waits for (see callRecorded).
func (s script) runAckedThen(ctx context.Context, rdb Processor, args []any, acks Acks, then []any) (any, int, error) {
	node, err := primaryOf(ctx, rdb, args[3].(string))
	if err != nil {
		return nil, 0, err
	}
	for _, eval := range []bool{false, true} {
		args[0], args[1] = "evalsha", s.sha
		if eval {
			args[0], args[1] = "eval", s.src
		}
		pipe := node.Pipeline()
		cmd := redis.NewCmd(ctx, args...)
		cmd.SetFirstKeyPos(3)
		_ = pipe.Process(ctx, cmd)
		if then != nil {
			_ = pipe.Process(ctx, redis.NewCmd(ctx, then...))
		}
		wait := redis.NewIntCmd(ctx, "wait", acks.Replicas, max(acks.Timeout.Milliseconds(), 1))
		_ = pipe.Process(ctx, wait)
		_, _ = pipe.Exec(ctx)
		if !eval && IsNoScript(cmd.Err()) {
			continue
		}
		v, err := cmd.Result()
		return v, int(wait.Val()), ScriptError(err)
	}
	panic("unreachable")
}

// primaryOf returns the client of the primary that owns key: rdb itself, or on a
// Cluster the client of the key's shard (WAIT counts the replicas of the
// connection's node).
func primaryOf(ctx context.Context, rdb Processor, key string) (pipeliner, error) {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.MasterForKey(ctx, key)
	}
	p, ok := rdb.(pipeliner)
	if !ok {
		return nil, errors.New("lua: replica acknowledgements need a client that pipelines")
	}
	return p, nil
}

// Publish commands accepted by the scripts that announce a release.
const (
	Publish        = "PUBLISH"  // classic pub/sub: standalone, Sentinel
	ShardedPublish = "SPUBLISH" // sharded pub/sub: Redis Cluster 7+
)

// now returns the client's wall clock as the fair lock's scripts take it, in
// epoch milliseconds: Redisson's clients compare their clocks through it.
func now() int64 { return time.Now().UnixMilli() }

// IsNoScript reports whether err says the server does not have the script cached.
func IsNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}

// Servers wrap an error raised inside a script (a redis.call that failed) with
// the script's hash and line, differently: Redis 6.2 in front of it ("ERR Error
// running script (call to f_<sha>): @user_script:89: WRONGTYPE …"), Redis 7 and
// Valkey after it ("WRONGTYPE … script: <sha>, on @user_script:89."). An error
// the script returns (redis.error_reply) is never wrapped.
var (
	wrappedBefore = regexp.MustCompile(`^ERR Error running script \(call to f_[0-9a-f]{40}\): @user_script:\d+: `)
	wrappedAfter  = regexp.MustCompile(` script: [0-9a-f]{40}, on @user_script:\d+\.$`)
)

// ScriptError returns err as the script raised it: a server's error reply with
// the wrapping of a script's error taken off, so that it reads, and matches
// (IsWrongType, redis.HasErrorPrefix), the same on every server; any other
// error as it is.
func ScriptError(err error) error {
	re, ok := errors.AsType[redis.Error](err) // errors.As(err, &re) would allocate re, nil err or not
	if !ok {
		return err
	}
	msg := re.Error()
	inner := wrappedAfter.ReplaceAllLiteralString(wrappedBefore.ReplaceAllLiteralString(msg, ""), "")
	if inner == msg {
		return err
	}
	return serverError(inner)
}

// serverError is an error reply of the server, as go-redis' own (redis.Error).
type serverError string

func (e serverError) Error() string { return string(e) }
func (serverError) RedisError()     {}

// IsWrongType reports whether err is Redis' WRONGTYPE error: the key holds a value
// of another type than the script expects (or, ErrNotCount, a string that is
// not a count).
func IsWrongType(err error) bool {
	return err != nil && (redis.HasErrorPrefix(err, "WRONGTYPE") || errors.Is(err, ErrNotCount))
}

// millis renders d as whole milliseconds, at least 1, as the scripts expect.
func millis(d time.Duration) int64 {
	return max(d.Milliseconds(), 1)
}

// ttl reads a PTTL: -1 for none, and at most the longest time.Duration for
// one beyond it (about 292 years: PEXPIRE accepts more).
func ttl(pttl int64) time.Duration {
	switch {
	case pttl < 0:
		return -1
	case pttl > math.MaxInt64/int64(time.Millisecond):
		return math.MaxInt64
	}
	return time.Duration(pttl) * time.Millisecond
}

func flag(b bool) any {
	if b {
		return "1"
	}
	return "0"
}

func publish(cmd string) string {
	if cmd == ShardedPublish {
		return ShardedPublish
	}
	return Publish
}

func firstInt(v []any) (int64, bool) {
	if len(v) != 1 {
		return 0, false
	}
	n, ok := v[0].(int64)
	return n, ok
}
