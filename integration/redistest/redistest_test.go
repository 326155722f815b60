package redistest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { Main(m) }

// eventually polls cond every 10 ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %s", timeout, msg)
		}
		<-time.After(10 * time.Millisecond)
	}
}

// processGone reports whether pid no longer exists or is a zombie awaiting its reaper.
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	return procState(pid) == "Z"
}

// procState returns the state letter of pid from /proc ("R", "S", "T", "Z", ...), "" if unknown.
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// pid (comm) state ...; comm may contain spaces, so cut after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+3 > len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

func TestStartThreeServersAtOnce(t *testing.T) {
	var mu sync.Mutex
	addrs := map[string]bool{}
	pids := map[int]bool{}
	t.Run("group", func(t *testing.T) {
		for i := range 3 {
			t.Run(strconv.Itoa(i), func(t *testing.T) {
				t.Parallel()
				srv := Start(t)
				require.True(t, srv.Controllable())
				rdb := srv.Client(t)
				ctx := context.Background()
				require.NoError(t, rdb.Set(ctx, "who", i, 0).Err())
				got, err := rdb.Get(ctx, "who").Int()
				require.NoError(t, err)
				require.Equal(t, i, got)
				// The server is the process we started, with the configuration we asked for.
				info, err := rdb.Info(ctx, "server").Result()
				require.NoError(t, err)
				require.Contains(t, info, "process_id:"+strconv.Itoa(srv.Pid())+"\r\n")
				cfg, err := rdb.ConfigGet(ctx, "*").Result()
				require.NoError(t, err)
				assert.Equal(t, "", cfg["save"])
				assert.Equal(t, "no", cfg["appendonly"])
				assert.Equal(t, "127.0.0.1", cfg["bind"])
				if srv.Version(t).AtLeast(7, 0) {
					assert.Equal(t, "local", cfg["enable-debug-command"])
				} else {
					assert.NotContains(t, cfg, "enable-debug-command", "%s has no such directive", srv.Version(t))
				}
				mu.Lock()
				addrs[srv.Addr] = true
				pids[srv.Pid()] = true
				mu.Unlock()
			})
		}
	})
	require.Len(t, addrs, 3)
	require.Len(t, pids, 3)
	for pid := range pids {
		assert.True(t, processGone(pid), "redis-server %d still running after its test", pid)
	}
}

func TestStartExtraArgs(t *testing.T) {
	srv := Start(t, "--maxmemory", "10mb", "--maxmemory-policy", "noeviction")
	rdb := srv.Client(t)
	cfg, err := rdb.ConfigGet(context.Background(), "maxmemory*").Result()
	require.NoError(t, err)
	assert.Equal(t, "10485760", cfg["maxmemory"])
	assert.Equal(t, "noeviction", cfg["maxmemory-policy"])
	// DEBUG is enabled for local clients (by the directive on 7.0 and later, always before).
	require.NoError(t, rdb.Do(context.Background(), "DEBUG", "SLEEP", "0").Err())
}

func TestStartFailureShowsOutput(t *testing.T) {
	_, err := startProcessServer(mustBinary(t), []string{"--no-such-option", "x"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no-such-option", "redis-server's complaint is in the error")
}

func mustBinary(t *testing.T) string {
	t.Helper()
	bin, err := findBinary()
	require.NoError(t, err)
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no redis-server binary under CI: " + InstallHint)
		}
		t.Skip("no redis-server binary")
	}
	return bin
}

func TestRestartKeepsPortAndEmptiesData(t *testing.T) {
	srv := Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	require.NoError(t, rdb.Set(ctx, "k", "v", 0).Err())
	addr, pid := srv.Addr, srv.Pid()

	srv.Restart(t)
	assert.Equal(t, addr, srv.Addr)
	assert.NotEqual(t, pid, srv.Pid())
	assert.True(t, processGone(pid))
	// The pooled connection is dead; go-redis retries on a new one.
	err := rdb.Get(ctx, "k").Err()
	require.ErrorIs(t, err, redis.Nil, "dataset must be empty after Restart")
	n, err := rdb.DBSize(ctx).Result()
	require.NoError(t, err)
	assert.Zero(t, n)

	// Kill, then Restart from the down state.
	srv.Kill()
	srv.Restart(t)
	require.NoError(t, rdb.Ping(ctx).Err())
	assert.Contains(t, srv.Output(), "--- redistest: restart ---")
}

func TestKill(t *testing.T) {
	srv := Start(t)
	pid := srv.Pid()
	require.NotZero(t, pid)
	srv.Kill()
	assert.True(t, processGone(pid))
	assert.Zero(t, srv.Pid())
	srv.Kill() // no-op
	_, err := net.DialTimeout("tcp", srv.Addr, time.Second)
	require.Error(t, err, "nothing listens after Kill")
	require.Error(t, srv.Signal(syscall.SIGCONT))
}

func TestSignalStopCont(t *testing.T) {
	srv := Start(t)
	ctx := context.Background()
	rdb := srv.Client(t, func(o *redis.Options) {
		o.ReadTimeout = 200 * time.Millisecond
		o.MaxRetries = -1
	})
	require.NoError(t, rdb.Ping(ctx).Err())

	require.NoError(t, srv.Signal(syscall.SIGSTOP))
	eventually(t, 5*time.Second, func() bool { return procState(srv.Pid()) == "T" }, "server stopped")
	err := rdb.Ping(ctx).Err()
	var ne net.Error
	require.ErrorAs(t, err, &ne, "a frozen server times out")
	assert.True(t, ne.Timeout())

	require.NoError(t, srv.Signal(syscall.SIGCONT))
	eventually(t, 5*time.Second, func() bool { return rdb.Ping(ctx).Err() == nil }, "server answers after SIGCONT")
}

// TestProxyDropRepliesRetry documents go-redis' retry behaviour: a command whose reply is lost
// times out after ReadTimeout, and go-redis sends it again on a new connection, so the server
// executes it once per send.
func TestProxyDropRepliesRetry(t *testing.T) {
	srv := Start(t)
	ctx := context.Background()
	direct := srv.Client(t)
	p := NewProxy(t, srv.Addr)
	key := Name(t)

	t.Run("MaxRetries=2", func(t *testing.T) {
		rdb := srv.Client(t, func(o *redis.Options) {
			o.Addr = p.Addr
			o.ReadTimeout = 200 * time.Millisecond
			o.MaxRetries = 2
		})
		require.NoError(t, rdb.Ping(ctx).Err()) // connect (handshake replies pass)
		p.DropReplies(1)
		start := time.Now()
		n, err := rdb.Incr(ctx, key).Result()
		require.NoError(t, err, "go-redis retried the timed-out INCR")
		assert.Equal(t, int64(2), n, "the client sees the second execution's reply")
		assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
		got, err := direct.Get(ctx, key).Int()
		require.NoError(t, err)
		assert.Equal(t, 2, got, "INCR ran on the server twice: once per send")
		assert.Equal(t, 1, p.Dropped())
		assert.Zero(t, p.PendingDrops())
	})

	t.Run("MaxRetries=-1", func(t *testing.T) {
		require.NoError(t, direct.Set(ctx, key, 0, 0).Err())
		rdb := srv.Client(t, func(o *redis.Options) {
			o.Addr = p.Addr
			o.ReadTimeout = 200 * time.Millisecond
			o.MaxRetries = -1
		})
		require.NoError(t, rdb.Ping(ctx).Err())
		p.DropReplies(1)
		err := rdb.Incr(ctx, key).Err()
		var ne net.Error
		require.ErrorAs(t, err, &ne)
		assert.True(t, ne.Timeout())
		got, err := direct.Get(ctx, key).Int()
		require.NoError(t, err)
		assert.Equal(t, 1, got, "the command ran although the client got an error")
	})
}

func TestProxyDropAll(t *testing.T) {
	srv := Start(t)
	ctx := context.Background()
	p := NewProxy(t, srv.Addr)
	rdb := srv.Client(t, func(o *redis.Options) {
		o.Addr = p.Addr
		o.ReadTimeout = 200 * time.Millisecond
		o.MaxRetries = -1
	})
	direct := srv.Client(t)
	key := Name(t)
	require.NoError(t, rdb.Ping(ctx).Err())

	p.SetDropAll(true)
	for range 3 {
		err := rdb.Set(ctx, key, "x", 0).Err()
		require.Error(t, err)
	}
	v, err := direct.Get(ctx, key).Result()
	require.NoError(t, err)
	assert.Equal(t, "x", v, "commands reach the server while replies are black-holed")
	assert.GreaterOrEqual(t, p.Dropped(), 3)

	p.SetDropAll(false)
	require.NoError(t, rdb.Ping(ctx).Err())
}

func TestProxyCloseConns(t *testing.T) {
	srv := Start(t)
	p := NewProxy(t, srv.Addr)
	conn, err := net.Dial("tcp", p.Addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "PING\r\n")
	require.NoError(t, err)
	buf := make([]byte, 7)
	_, err = io.ReadFull(conn, buf)
	require.NoError(t, err)
	require.Equal(t, "+PONG\r\n", string(buf))
	require.Equal(t, 1, p.Conns())

	p.CloseConns()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = conn.Read(buf)
	require.Error(t, err, "the client side was reset")
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "reset, not a timeout: %v", err)
	eventually(t, 5*time.Second, func() bool { return p.Conns() == 0 }, "connections dropped")

	// New connections still work, e.g. a go-redis client's reconnect.
	rdb := srv.Client(t, func(o *redis.Options) { o.Addr = p.Addr })
	require.NoError(t, rdb.Ping(context.Background()).Err())
	p.CloseConns()
	eventually(t, 5*time.Second, func() bool { return rdb.Ping(context.Background()).Err() == nil }, "client reconnects")
}

func TestProxyClose(t *testing.T) {
	srv := Start(t)
	p := NewProxy(t, srv.Addr)
	rdb := srv.Client(t, func(o *redis.Options) { o.Addr = p.Addr; o.MaxRetries = -1 })
	require.NoError(t, rdb.Ping(context.Background()).Err())
	before := runtime.NumGoroutine()
	p.Close()
	assert.Less(t, runtime.NumGoroutine(), before, "proxy goroutines ended")
	_, err := net.DialTimeout("tcp", p.Addr, time.Second)
	require.Error(t, err)
	require.Error(t, rdb.Ping(context.Background()).Err())
	p.Close() // idempotent (the cleanup calls it again too)
}

func TestProxyUpstreamDown(t *testing.T) {
	srv := Start(t)
	p := NewProxy(t, srv.Addr)
	rdb := srv.Client(t, func(o *redis.Options) { o.Addr = p.Addr; o.MaxRetries = -1 })
	srv.Kill()
	require.Error(t, rdb.Ping(context.Background()).Err())
	srv.Restart(t)
	eventually(t, 5*time.Second, func() bool { return rdb.Ping(context.Background()).Err() == nil }, "reachable after restart")
}

func TestSharedExternalAddr(t *testing.T) {
	srv := Start(t)
	t.Setenv("REDIS_ADDR", srv.Addr)
	s := Shared(t)
	assert.Equal(t, srv.Addr, s.Addr)
	assert.Same(t, s, Shared(t))
	assert.False(t, s.Controllable())
	assert.Zero(t, s.Pid())
	assert.Error(t, s.Signal(syscall.SIGSTOP))
	assert.Panics(t, s.Kill)
	assert.Panics(t, func() { s.Restart(t) })
	require.NoError(t, s.Client(t).Ping(context.Background()).Err())
	assert.Empty(t, s.Output())
}

func TestSharedStartsOnce(t *testing.T) {
	t.Setenv("REDIS_ADDR", "")
	a := Shared(t)
	b := Shared(t)
	require.Same(t, a, b)
	require.True(t, a.Controllable())
	require.NoError(t, a.Client(t).Ping(context.Background()).Err())
	t.Run("sub", func(t *testing.T) {
		require.Same(t, a, Shared(t))
	})
	// Still running after the tests that used it; Main stops it.
	require.NotZero(t, a.Pid())
}

// fakeTB records how a harness call ended the test, without ending the real one.
type fakeTB struct {
	testing.TB
	mu      sync.Mutex
	skipped string
	failed  string
}

func (f *fakeTB) Skipf(format string, args ...any) {
	f.mu.Lock()
	f.skipped = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.failed = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// runFake runs fn with a fakeTB on its own goroutine and returns how it ended.
func runFake(t *testing.T, fn func(tb testing.TB)) (skipped, failed string) {
	f := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.skipped, f.failed
}

func TestNoRedisAvailable(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no redis-server, no docker client
	t.Setenv("REDIS_SERVER", "")
	t.Setenv("REDIS_ADDR", "")
	// Make sure the Docker preflight fails even on a machine with an engine.
	t.Setenv("DOCKER_HOST", "unix://"+t.TempDir()+"/no-docker.sock")

	t.Run("skip outside CI", func(t *testing.T) {
		t.Setenv("CI", "")
		skipped, failed := runFake(t, func(tb testing.TB) { Start(tb) })
		assert.Empty(t, failed)
		assert.Contains(t, skipped, "scripts/setup.sh")
		assert.Contains(t, skipped, "apt-get install redis-server")
		t.Log(skipped)
	})
	t.Run("fail under CI", func(t *testing.T) {
		t.Setenv("CI", "true")
		skipped, failed := runFake(t, func(tb testing.TB) { Start(tb) })
		assert.Empty(t, skipped)
		assert.Contains(t, failed, "scripts/setup.sh")
	})
	t.Run("bad REDIS_SERVER fails", func(t *testing.T) {
		t.Setenv("CI", "")
		t.Setenv("REDIS_SERVER", "/nonexistent/redis-server")
		skipped, failed := runFake(t, func(tb testing.TB) { Start(tb) })
		assert.Empty(t, skipped)
		assert.Contains(t, failed, "/nonexistent/redis-server")
	})
}

func TestName(t *testing.T) {
	a, b := Name(t), Name(t)
	assert.NotEqual(t, a, b)
	assert.True(t, strings.HasPrefix(a, "test:TestName:"), a)
}

// workerMain is the body of the worker processes started by the worker tests.
func workerMain(t *testing.T) {
	switch WorkerRole() {
	case "echo":
		fmt.Println("noise")
		fmt.Printf("HELLO %d %s\n", WorkerIndex(), os.Getenv("GREETING"))
	case "sleeper":
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		defer signal.Stop(ch)
		fmt.Println("READY")
		select {
		case sig := <-ch:
			fmt.Println("GOT", sig)
		case <-time.After(time.Minute):
			t.Fatal("no signal within a minute")
		}
	case "fail":
		t.Fatal("worker failing on purpose")
	case "server":
		srv := Start(t)
		fmt.Println("SERVER", srv.Pid(), srv.Addr)
		<-time.After(time.Minute) // killed by the parent long before
		t.Fatal("not killed")
	default:
		t.Fatalf("unknown role %q", WorkerRole())
	}
}

func TestWorkerLines(t *testing.T) {
	if WorkerRole() != "" {
		workerMain(t)
		return
	}
	ws := RunWorkers(t, t.Name(), "echo", 3, "GREETING=hi")
	for i, w := range ws {
		assert.Equal(t, i, w.Index)
		line := w.Expect(t, "HELLO", 30*time.Second)
		assert.Equal(t, fmt.Sprintf("HELLO %d hi", i), line)
	}
	for _, w := range ws {
		require.NoError(t, w.Wait(), w.Output())
		var rest []string
		for l := range w.Lines() {
			rest = append(rest, l)
		}
		assert.Equal(t, []string{"PASS"}, rest)
		assert.Contains(t, w.Output(), "noise")
	}
}

func TestWorkerSignal(t *testing.T) {
	if WorkerRole() != "" {
		workerMain(t)
		return
	}
	w := StartWorker(t, t.Name(), "sleeper")
	w.Expect(t, "READY", 30*time.Second)
	require.NoError(t, w.Signal(syscall.SIGTERM))
	assert.Equal(t, "GOT terminated", w.Expect(t, "GOT", 30*time.Second))
	require.NoError(t, w.Wait(), w.Output())
	require.Error(t, w.Signal(syscall.SIGTERM), "exited")
}

func TestWorkerFailure(t *testing.T) {
	if WorkerRole() != "" {
		workerMain(t)
		return
	}
	w := StartWorker(t, t.Name(), "fail")
	err := w.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 1, ee.ExitCode())
	assert.Contains(t, w.Output(), "worker failing on purpose")
}

func TestWorkerLeftoverKilled(t *testing.T) {
	if WorkerRole() != "" {
		workerMain(t)
		return
	}
	var pid int
	t.Run("sub", func(t *testing.T) {
		if WorkerRole() != "" {
			return
		}
		w := StartWorker(t, "TestWorkerLeftoverKilled", "sleeper")
		w.Expect(t, "READY", 30*time.Second)
		pid = w.Pid()
		// Not signalled, not waited: the cleanup kills it.
	})
	require.NotZero(t, pid)
	assert.True(t, processGone(pid), "worker %d survived its test", pid)
}

// TestServerDiesWithTestBinary kills a worker holding a redis-server with SIGKILL (no cleanup
// runs) and checks that the kernel kills the server too.
func TestServerDiesWithTestBinary(t *testing.T) {
	if WorkerRole() != "" {
		workerMain(t)
		return
	}
	w := StartWorker(t, t.Name(), "server")
	fields := strings.Fields(w.Expect(t, "SERVER", 30*time.Second))
	require.Len(t, fields, 3)
	pid, err := strconv.Atoi(fields[1])
	require.NoError(t, err)
	require.False(t, processGone(pid))
	require.NoError(t, w.Signal(syscall.SIGKILL))
	require.Error(t, w.Wait())
	eventually(t, 10*time.Second, func() bool { return processGone(pid) }, "redis-server killed with its parent")
	// No dial check on fields[2]: another package's test may already have
	// started a server on the freed port.
}

func TestRunPattern(t *testing.T) {
	assert.Equal(t, `^TestA$`, runPattern("TestA"))
	assert.Equal(t, `^TestA$/^sub_1\.x$`, runPattern("TestA/sub_1.x"))
}

func TestStartCluster(t *testing.T) {
	start := time.Now()
	c := StartCluster(t, 3, 1)
	t.Logf("3 primaries + 3 replicas up in %v", time.Since(start))
	rdb := c.Client(t)
	ctx := context.Background()
	owners := map[string]bool{}
	for i := 0; i < 30; i++ {
		key := fmt.Sprintf("k%d", i)
		if err := rdb.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatal(err)
		}
		m, err := rdb.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		owners[m.Options().Addr] = true
	}
	if len(owners) != 3 {
		t.Fatalf("keys landed on %d primaries, want 3: %v", len(owners), owners)
	}
	for i, rs := range c.Replicas {
		if len(rs) != 1 {
			t.Fatalf("primary %d has %d replicas", i, len(rs))
		}
	}
}

func TestStartFailover(t *testing.T) {
	start := time.Now()
	f := StartFailover(t, 2, 3)
	t.Logf("primary + 2 replicas + 3 sentinels up in %v", time.Since(start))
	rdb := f.Client(t)
	ctx := context.Background()
	require.NoError(t, rdb.Set(ctx, "k", "v", 0).Err())
	old, err := f.Master(ctx)
	require.NoError(t, err)
	require.Equal(t, f.Primary.Addr, old)
	f.Primary.Kill()
	killed := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	now, err := f.WaitMasterChange(wctx, old)
	require.NoError(t, err)
	t.Logf("sentinels promoted %s %v after the kill", now, time.Since(killed))
	require.Eventually(t, func() bool { return rdb.Set(ctx, "k2", "v", 0).Err() == nil }, 20*time.Second, 50*time.Millisecond)
}

// TestParseVersion: the --version lines of every server of the matrix, and what each
// has of Redis.
func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		line    string
		want    string
		redis70 bool
		redis74 bool
	}{
		{"Redis server v=6.2.16 sha=00000000:0 malloc=libc bits=64 build=c47b", "Redis 6.2.16", false, false},
		{"Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=ae4d", "Redis 7.0.15", true, false},
		{"Redis server v=7.4.1 sha=c47bc2e0:0 malloc=libc bits=64 build=9e1b", "Redis 7.4.1", true, true},
		{"Server v=7.2.7 sha=c47bc2e0:1 malloc=libc bits=64 build=3365", "Valkey 7.2.7", true, false},
		{"Valkey server v=8.0.1 sha=c47bc2e0:0 malloc=libc bits=64 build=1087", "Valkey 8.0.1", true, false},
	} {
		v, err := parseVersion(tc.line)
		require.NoError(t, err, tc.line)
		require.Equal(t, tc.want, v.String())
		require.Equal(t, tc.redis70, v.AtLeast(7, 0), "%s has Redis 7.0's features", v)
		require.Equal(t, tc.redis74, v.AtLeast(7, 4), "%s has Redis 7.4's features", v)
	}
	_, err := parseVersion("KeyDB server v=6.3.4")
	require.Error(t, err)
}
