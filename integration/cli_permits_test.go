package integration

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// permitScript is the command of the permit tests: it prints its permit's id,
// whether HOLDFAST_OWNER reached it, then waits for its stdin to close.
const permitScript = `echo "$HOLDFAST_PERMIT"; echo "${HOLDFAST_OWNER-unset}"; read x || :`

// cliPermitStatus is one object of "holdfast status --json" with the fields
// of semaphores; decoding rejects any field the documentation does not list.
type cliPermitStatus struct {
	cliStatus
	Permits []cliPermit `json:"permits"`
}

// cliPermit is an acquired permit in cliPermitStatus.
type cliPermit struct {
	ID               string `json:"id"`
	ExpiryUnixMillis *int64 `json:"expiry_unix_ms"`
	ExpiresInMillis  *int64 `json:"expires_in_ms"`
	NoLease          bool   `json:"no_lease"`
}

// statusDecoded runs "holdfast status --json" on the shared server with args
// and decodes its output as a list of T, which must name every field of it;
// it must exit 0.
func statusDecoded[T any](t testing.TB, args ...string) []T {
	t.Helper()
	r := statusCLI(t, append([]string{"status", "--json", "--redis", sharedURL(t)}, args...)...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	var list []T
	require.NoError(t, dec.Decode(&list), r.stdout)
	return list
}

// permitStatus is statusDecoded with the fields of semaphores.
func permitStatus(t testing.TB, args ...string) []cliPermitStatus {
	t.Helper()
	return statusDecoded[cliPermitStatus](t, args...)
}

// startPermitHolder starts "holdfast lock --permits n args... name --
// permitScript" and returns it once it holds a permit, with its id.
func startPermitHolder(t *testing.T, name string, n int, args ...string) (*lockCLI, string) {
	t.Helper()
	args = append(append([]string{"--permits", strconv.Itoa(n)}, args...), name, "--", "sh", "-c", permitScript)
	p := startLockCLI(t, redistest.Shared(t).Addr, args...)
	id := p.next(t)
	require.Regexp(t, `^[0-9a-f]{32}$`, id)
	p.expect(t, "unset") // HOLDFAST_OWNER: a permit has no owner field
	return p, id
}

// permitIDs returns the ids of the acquired permits of the semaphore name, as
// status shows them (the zset's members, in hex).
func permitIDs(t testing.TB, rdb redis.Cmdable, name string) []string {
	t.Helper()
	members, err := rdb.ZRange(context.Background(), lua.PermitTimeoutsName(name), 0, -1).Result()
	require.NoError(t, err)
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = hex.EncodeToString([]byte(m))
	}
	return ids
}

// noOutput requires p to print nothing for d: it still waits for a permit.
func noOutput(t *testing.T, p *lockCLI, d time.Duration) {
	t.Helper()
	select {
	case l := <-p.lines:
		t.Fatalf("holdfast ran its command (%q) while no permit was free; stderr:\n%s", l, p.stderr.String())
	case <-time.After(d):
	}
}

// TestCLILockPermitsAtMostN: three "holdfast lock --permits 2" runs of one
// name started at once: two run their commands, the third waits (subscribed to
// the semaphore's channel) until one of them ends, then runs at once. The
// semaphore was created with 2 permits, and every permit is back at the end.
func TestCLILockPermitsAtMostN(t *testing.T) {
	rdb, _, name := setup(t)
	ctx := testCtx(t, 60*time.Second)
	var runs []*lockCLI
	for range 3 {
		runs = append(runs, startLockCLI(t, redistest.Shared(t).Addr, "--permits", "2", name, "--", "sh", "-c", permitScript))
	}
	ids, running := map[*lockCLI]string{}, []*lockCLI{}
	for len(running) < 2 {
		p, id := firstLine(t, runs, running)
		ids[p], running = id, append(running, p)
	}
	var waiting *lockCLI
	for _, p := range runs {
		if ids[p] == "" {
			waiting = p
		}
	}
	require.ElementsMatch(t, []string{ids[running[0]], ids[running[1]]}, permitIDs(t, rdb, name))
	require.Equal(t, "0", rdb.Get(ctx, name).Val(), "2 permits, both taken")
	awaitSubscribers(t, rdb, lua.SemaphoreChannel(name), 1)
	noOutput(t, waiting, 500*time.Millisecond)

	start := time.Now()
	require.Equal(t, 0, running[0].finish(t), running[0].stderr.String())
	id := waiting.next(t)
	require.Less(t, time.Since(start), 900*time.Millisecond, "woken by the release, not by a re-check")
	require.ElementsMatch(t, []string{ids[running[1]], id}, permitIDs(t, rdb, name))

	for _, p := range []*lockCLI{running[1], waiting} {
		require.Equal(t, 0, p.finish(t), p.stderr.String())
	}
	require.Empty(t, permitIDs(t, rdb, name))
	require.Equal(t, "2", rdb.Get(ctx, name).Val(), "every permit is back")
	for _, p := range runs {
		require.NotContains(t, p.stderr.String(), "warning", "created with 2, used with 2")
	}
}

// firstLine waits for the first of runs not in skip to print its permit's id
// (then "unset": no HOLDFAST_OWNER) and returns it with the id.
func firstLine(t *testing.T, runs, skip []*lockCLI) (*lockCLI, string) {
	t.Helper()
	deadline := time.After(cliLockTimeout)
	for {
		for _, p := range runs {
			if slices.Contains(skip, p) {
				continue
			}
			select {
			case id, ok := <-p.lines:
				require.True(t, ok, "holdfast's output ended; stderr:\n%s", p.stderr.String())
				require.Regexp(t, `^[0-9a-f]{32}$`, id)
				p.expect(t, "unset")
				return p, id
			default:
			}
		}
		select {
		case <-deadline:
			t.Fatalf("no holdfast ran its command in %v", cliLockTimeout)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestCLILockPermitsNeverMore: 3 goroutines run "holdfast lock --permits 2" 4
// times each; every command counts the commands running (a file each in a
// shared directory, made before and removed after its count): never more
// than 2, and 2 at some point.
func TestCLILockPermitsNeverMore(t *testing.T) {
	_, _, name := setup(t)
	ctx := testCtx(t, 60*time.Second)
	bin, dir, url := holdfastBin(t), t.TempDir(), sharedURL(t)
	script := `f="$1/$$"; : > "$f"; ls "$1" | wc -l; sleep 0.1; rm "$f"`
	out := make(chan string, 12)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for range 4 {
				cmd := exec.CommandContext(ctx, bin, "lock", "--redis", url, "--permits", "2", "-q", name, "--", "sh", "-c", script, "sh", dir)
				b, err := cmd.CombinedOutput()
				if err != nil {
					b = append(b, err.Error()...)
				}
				out <- strings.TrimSpace(string(b))
			}
		})
	}
	wg.Wait()
	close(out)
	counts := map[string]int{}
	for o := range out {
		counts[o]++
	}
	require.Subset(t, []string{"1", "2"}, slices.Collect(maps.Keys(counts)), "%v", counts)
	require.Positive(t, counts["2"], "two commands ran at once: %v", counts)
}

// TestCLILockPermitsBusy: with every permit taken, -n exits with -E's code at
// once, saying how many permits are available and who holds them; -w gives up
// after its wait.
func TestCLILockPermitsBusy(t *testing.T) {
	rdb, _, name := setup(t)
	holder, id := startPermitHolder(t, name, 1)
	addr := redistest.Shared(t).Addr

	p := startLockCLI(t, addr, "--permits", "1", "-n", name, "--", "echo", "never")
	require.Equal(t, 1, p.wait(t), p.stderr.String())
	require.Equal(t, "holdfast lock: "+strconv.Quote(name)+" is busy: 0 available, 1 acquired: "+id+" (lease ",
		p.stderr.String()[:len("holdfast lock: "+strconv.Quote(name)+" is busy: 0 available, 1 acquired: "+id+" (lease ")])
	require.Equal(t, 1, strings.Count(p.stderr.String(), "\n"), "one line: %s", p.stderr.String())

	code, stderr := runLockCLI(t, addr, "--permits", "1", "-w", "0.3", "-E", "9", name, "--", "echo", "never")
	require.Equal(t, 9, code, stderr)
	require.Contains(t, stderr, "is still busy after 300ms")
	require.Equal(t, []string{id}, permitIDs(t, rdb, name), "the busy runs left nothing behind")
	require.Equal(t, 0, holder.finish(t), holder.stderr.String())
}

// TestCLILockPermitsOtherTotal: a semaphore that exists with another total is
// used as it is, with a warning on stderr (even with -q); it is not resized.
func TestCLILockPermitsOtherTotal(t *testing.T) {
	rdb, _, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	require.NoError(t, rdb.Set(ctx, name, "3", 0).Err())
	code, stderr := runLockCLI(t, redistest.Shared(t).Addr, "--permits", "2", "-q", name, "--", "true")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "holdfast lock: warning: the semaphore "+strconv.Quote(name)+
		" has 3 permits in all, not 2 (--permits): using it as it is\n", stderr)
	require.Equal(t, "3", rdb.Get(ctx, name).Val())
}

// TestCLILockPermitsRefusals: --permits 0 or negative is a usage error (two
// lines, exit 64); a lock's hash at NAME is not a semaphore (65, left alone).
func TestCLILockPermitsRefusals(t *testing.T) {
	rdb, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	for _, n := range []string{"0", "-1"} {
		r := statusCLI(t, "lock", "--redis", sharedURL(t), "--permits", n, name, "--", "echo", "never")
		require.Equal(t, 64, r.code, r.stderr)
		requireUsageError(t, "lock", r.stderr)
		require.Contains(t, r.stderr, "--permits "+n+": a semaphore has 1 permit or more")
	}
	require.Zero(t, rdb.Exists(ctx, name).Val(), "nothing written")

	lease := answer(c.NewMutex(name).Lock(ctx)).value(t)
	defer func() { require.NoError(t, lease.Unlock(ctx)) }()
	code, stderr := runLockCLI(t, redistest.Shared(t).Addr, "--permits", "2", name, "--", "echo", "never")
	require.Equal(t, 65, code, stderr)
	require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %s", stderr)
	require.Equal(t, "hash", rdb.Type(ctx, name).Val(), "the lock is left alone")
}

// TestCLILockPermitLost: a permit deleted from outside (its zset member
// removed, as a Redis admin would: the permit is then gone from the total
// too) or force-released by "holdfast unlock --force --permit" is lost: the
// watchdog's next renewal finds it gone, holdfast stops the command (SIGTERM)
// and exits 75, as for a lost lock.
func TestCLILockPermitLost(t *testing.T) {
	rdb, _, base := setup(t)
	ctx := testCtx(t, 60*time.Second)
	for i, how := range []string{"ZREM", "unlock --force --permit"} {
		name := base + ":" + strconv.Itoa(i)
		p := startLockCLI(t, redistest.Shared(t).Addr, "--permits", "2", "--watchdog-timeout", "600ms", "--kill-grace", "500ms",
			name, "--", "sh", "-c", `trap "echo got TERM; exit 0" TERM; echo "$HOLDFAST_PERMIT"; `+loopForever)
		id := p.next(t)
		raw := answer(hex.DecodeString(id)).value(t, id)
		if how == "ZREM" {
			require.EqualValues(t, 1, rdb.ZRem(ctx, lua.PermitTimeoutsName(name), string(raw)).Val())
		} else {
			r := statusCLI(t, "unlock", "--force", "--redis", sharedURL(t), "--permit", id, name)
			require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
			require.Contains(t, r.stdout, "force-released permit "+id+" of "+name)
		}
		p.expect(t, "got TERM")
		require.Equal(t, exitLockLost, p.wait(t), "%s: %s", how, p.stderr.String())
		require.Contains(t, p.stderr.String(), "holdfast lock: lost "+strconv.Quote(name)+": ", how)
		require.Equal(t, 1, strings.Count(p.stderr.String(), "\n"), "one line: %s", p.stderr.String())
		require.Empty(t, permitIDs(t, rdb, name), how)
	}
}

// TestCLILockPermitLease: with --lease the permit has a fixed lease, not
// renewed: when it runs out, the command is stopped and holdfast exits 75.
func TestCLILockPermitLease(t *testing.T) {
	_, _, name := setup(t)
	p := startLockCLI(t, redistest.Shared(t).Addr, "--permits", "1", "--lease", "0.4", name, "--",
		"sh", "-c", `trap "echo got TERM; exit 0" TERM; echo ready; `+loopForever)
	p.expect(t, "ready")
	p.expect(t, "got TERM")
	require.Equal(t, exitLockLost, p.wait(t), p.stderr.String())
	require.GreaterOrEqual(t, p.took, 400*time.Millisecond)
	require.Contains(t, p.stderr.String(), "holdfast lock: lost "+strconv.Quote(name)+": rlock: permit lost")
}

// TestCLIStatusPermits: status lists the acquired permits of a
// permit-expirable semaphore with their ids and leases: a holdfast holder's
// (watchdog lease), a Java peer's taken without a lease; and the waiter.
func TestCLIStatusPermits(t *testing.T) {
	rdb, _, name := setup(t)
	ctx := testCtx(t, 60*time.Second)
	holder, id := startPermitHolder(t, name, 2)
	// A Java client's permit without a lease: its id's 16 bytes scored with
	// Redisson's sentinel, taken from the available count (protocol §2.12).
	java := "00112233445566778899aabbccddeeff"
	raw, _ := hex.DecodeString(java)
	require.NoError(t, rdb.ZAdd(ctx, lua.PermitTimeoutsName(name), redis.Z{Score: 922337203685477, Member: string(raw)}).Err())
	require.NoError(t, rdb.Decr(ctx, name).Err())
	waiter := startLockCLI(t, redistest.Shared(t).Addr, "--permits", "2", name, "--", "echo", "ran")
	awaitSubscribers(t, rdb, lua.SemaphoreChannel(name), 1)

	list := permitStatus(t, name)
	require.Len(t, list, 1)
	st := list[0]
	require.Equal(t, []string{"permit_semaphore", "0", "redisson_sc:{" + name + "}"}, []string{st.Kind, st.Value, st.Channel})
	require.EqualValues(t, 2, st.AcquiredPermits)
	require.EqualValues(t, 1, st.Subscribers)
	require.Len(t, st.Permits, 2)
	require.Equal(t, id, st.Permits[0].ID, "the leased permit first: earliest expiry")
	require.False(t, st.Permits[0].NoLease)
	require.InDelta(t, 30_000, *st.Permits[0].ExpiresInMillis, 11_000, "a watchdog lease, renewed every 10 s")
	require.Equal(t, cliPermit{ID: java, NoLease: true}, st.Permits[1])

	out := statusHuman(t, name)
	require.Contains(t, out, name+": permit-expirable semaphore: 0 available, 2 acquired\n")
	require.Regexp(t, `\n    `+id+`  lease [0-9.]+s left\n`, out)
	require.Contains(t, out, "\n    "+java+"  no lease\n")
	require.Contains(t, out, "waiters:  1 subscribed to redisson_sc:{"+name+"}")

	r := statusCLI(t, "unlock", "--force", "--redis", sharedURL(t), "--permit", strings.ToUpper(java), name)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	require.Equal(t, "force-released permit "+java+" of "+name+" (no lease); announced on redisson_sc:{"+name+"} (1 subscribed)\n", r.stdout)
	waiter.expect(t, "ran")
	require.Equal(t, 0, waiter.wait(t), waiter.stderr.String())
	require.Equal(t, 0, holder.finish(t), holder.stderr.String())
	require.Equal(t, "2", rdb.Get(ctx, name).Val())
}

// TestCLIUnlockPermitRefusals: a permit that is not held is "nothing to
// release" (0); --permit on a lock is refused (65, left alone); unlock
// without --permit on a semaphore releases nothing and says to give it (65).
func TestCLIUnlockPermitRefusals(t *testing.T) {
	rdb, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	holder, id := startPermitHolder(t, name, 1)
	url := sharedURL(t)
	other := strings.Repeat("ab", 16)

	r := statusCLI(t, "unlock", "--force", "--redis", url, "--permit", other, name)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	require.Contains(t, r.stdout, "permit "+other+" is not held in "+name+": nothing to release")
	require.Equal(t, []string{id}, permitIDs(t, rdb, name))

	r = statusCLI(t, "unlock", "--force", "--redis", url, name)
	require.Equal(t, 65, r.code, "stderr: %s", r.stderr)
	require.Contains(t, r.stderr, "release one of its permits with --permit ID")
	require.Equal(t, []string{id}, permitIDs(t, rdb, name))
	require.Equal(t, 0, holder.finish(t), holder.stderr.String())

	lock := name + ":lock"
	lease := answer(c.NewMutex(lock).Lock(ctx)).value(t)
	defer func() { require.NoError(t, lease.Unlock(ctx)) }()
	r = statusCLI(t, "unlock", "--force", "--redis", url, "--permit", id, lock)
	require.Equal(t, 65, r.code, "stderr: %s", r.stderr)
	require.Contains(t, r.stderr, "no permit released")
	require.EqualValues(t, 1, rdb.Exists(ctx, lock).Val())
}

// TestCLIStatusLatchAndSemaphore: an integer string is shown as the kind the
// user names: --latch shows the latch's count and its awaiters (subscribers
// of the latch's channel), --semaphore the available permits; without a key,
// a named latch is open and a named semaphore has 0 permits.
func TestCLIStatusLatchAndSemaphore(t *testing.T) {
	rdb, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	latch, sem, none := name+":latch", name+":sem", name+":none"
	defer awaitedLatch(t, ctx, rdb, c, latch)()
	require.NoError(t, rdb.Set(ctx, sem, "4", 0).Err())

	list := permitStatus(t, "--latch", latch, "--semaphore", sem, "--latch", none, sem)
	require.Len(t, list, 4)
	require.Equal(t, []string{"latch", "2", lua.LatchChannel(latch)}, []string{list[0].Kind, list[0].Value, list[0].Channel})
	require.EqualValues(t, 1, list[0].Subscribers, "the awaiter")
	require.Equal(t, []string{"semaphore", "4", lua.SemaphoreChannel(sem)}, []string{list[1].Kind, list[1].Value, list[1].Channel})
	require.Equal(t, []string{"latch", "none", ""}, []string{list[2].Kind, list[2].RedisType, list[2].Value})
	require.Equal(t, "semaphore_or_latch", list[3].Kind, "unnamed, an integer string may be either")

	out := statusHuman(t, "--latch", latch, "--semaphore", sem, "--latch", none)
	require.Contains(t, out, latch+": countdown latch: count 2\n  awaiters: 1 subscribed to "+lua.LatchChannel(latch)+"\n")
	require.Contains(t, out, sem+": semaphore: 4 available\n")
	require.Contains(t, out, none+": countdown latch: open (no key")
}

// awaitedLatch sets the latch name to 2 and has c await it until the
// returned stop is called; it returns once the awaiter listens.
func awaitedLatch(t *testing.T, ctx context.Context, rdb *redis.Client, c *rlock.Client, name string) (stop func()) {
	t.Helper()
	l := c.NewCountDownLatch(name)
	answer(l.TrySetCount(ctx, 2)).is(t, true)
	awaited := make(chan error, 1)
	actx, cancel := context.WithCancel(ctx)
	go func() { awaited <- l.Await(actx) }()
	awaitSubscribers(t, rdb, lua.LatchChannel(name), 1)
	return func() { cancel(); <-awaited }
}
