package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Version is what a server is: its flavour and release, and the Redis release whose
// features it has.
type Version struct {
	Flavor              string // "Redis" or "Valkey"
	Major, Minor, Patch int
	// Compat is the Redis release whose commands and directives the server has: the
	// release itself for Redis; for Valkey, the Redis 7.2.4 it forked from (Valkey 8
	// reports redis_version 7.2.4), or its own release when lower.
	Compat [3]int
}

// String is the server's name and release, as "Redis 6.2.16" or "Valkey 8.0.1".
func (v Version) String() string {
	return fmt.Sprintf("%s %d.%d.%d", v.Flavor, v.Major, v.Minor, v.Patch)
}

// AtLeast reports whether the server has what Redis major.minor has.
func (v Version) AtLeast(major, minor int) bool {
	return v.Compat[0] > major || (v.Compat[0] == major && v.Compat[1] >= minor)
}

// Needs skips the test, saying why, unless the server has what Redis major.minor has
// (feature names it). Tests that can check a fallback on older servers do that instead
// of calling Needs; the matrix (make test-servers) lists every test Needs skipped with
// its reason, so nothing is skipped silently.
func (v Version) Needs(tb testing.TB, major, minor int, feature string) {
	tb.Helper()
	if !v.AtLeast(major, minor) {
		tb.Skipf("%s: needs Redis %d.%d or later (%s); this server is %s", NotForThisServer, major, minor, feature, v)
	}
}

// NotForThisServer begins the message of a test skipped because the server is too old
// for what it checks (Version.Needs); scripts/testsum lists those skips by it.
const NotForThisServer = "not for this server"

// versionLine matches `redis-server --version` and `valkey-server --version`:
// "Redis server v=6.2.16 sha=…", "Valkey server v=8.0.1 sha=…", and Valkey 7.2's
// "Server v=7.2.7 sha=…", which names no flavour (Redis always names itself).
var versionLine = regexp.MustCompile(`^(?:(Redis|Valkey) )?[Ss]erver v=(\d+)\.(\d+)\.(\d+)`)

// binaryVersions caches the versions of the binaries asked about: bin -> Version.
var binaryVersions sync.Map

// binaryVersion returns the version of the server binary bin, from its --version.
func binaryVersion(bin string) (Version, error) {
	if v, ok := binaryVersions.Load(bin); ok {
		return v.(Version), nil
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return Version{}, fmt.Errorf("redistest: %s --version: %w", bin, err)
	}
	v, err := parseVersion(string(out))
	if err != nil {
		return Version{}, fmt.Errorf("redistest: %s --version: %w", bin, err)
	}
	binaryVersions.Store(bin, v)
	return v, nil
}

// parseVersion reads a server's --version line.
func parseVersion(line string) (Version, error) {
	m := versionLine.FindStringSubmatch(strings.TrimSpace(line))
	if m == nil {
		return Version{}, fmt.Errorf("unrecognised version %q", strings.TrimSpace(line))
	}
	n := func(s string) int { i, _ := strconv.Atoi(s); return i }
	flavor := m[1]
	if flavor == "" {
		flavor = "Valkey"
	}
	return newVersion(flavor, n(m[2]), n(m[3]), n(m[4])), nil
}

// newVersion returns the Version of flavour at release major.minor.patch.
func newVersion(flavor string, major, minor, patch int) Version {
	v := Version{Flavor: flavor, Major: major, Minor: minor, Patch: patch, Compat: [3]int{major, minor, patch}}
	if flavor == "Valkey" && (major > 7 || (major == 7 && minor >= 2)) {
		v.Compat = [3]int{7, 2, 4}
	}
	return v
}

// Version returns what the server is: from its binary's --version for a server this
// package started from a binary, else from INFO server (a server at $REDIS_ADDR, a
// container).
func (s *Server) Version(tb testing.TB) Version {
	tb.Helper()
	if s.bin != "" {
		v, err := binaryVersion(s.bin)
		if err != nil {
			tb.Fatal(err)
		}
		return v
	}
	v, err := infoVersion(s.Addr)
	if err != nil {
		tb.Fatalf("redistest: version of %s: %v", s.Addr, err)
	}
	return v
}

// infoVersion asks the server at addr what it is (INFO server).
func infoVersion(addr string) (Version, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return Version{}, err
	}
	fields := map[string]string{}
	for _, l := range strings.Split(info, "\n") {
		if k, val, ok := strings.Cut(strings.TrimSpace(l), ":"); ok {
			fields[k] = val
		}
	}
	flavor, release := "Redis", fields["redis_version"]
	if fields["server_name"] == "valkey" && fields["valkey_version"] != "" {
		flavor, release = "Valkey", fields["valkey_version"]
	}
	return parseVersion(flavor + " server v=" + release)
}
