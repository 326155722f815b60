// Package redistest is the real-Redis test harness of holdfast's integration tests.
//
// It starts redis-server processes on free loopback ports ([Start], [Shared]), hands out
// go-redis clients bound to a test's lifetime ([Server.Client]), and injects faults: killing,
// restarting and freezing the server process ([Server.Kill], [Server.Restart], [Server.Signal]),
// and a TCP [Proxy] that can swallow replies, black-hole a connection or reset it.
// For multi-process tests it re-executes the test binary as worker processes ([StartWorker],
// [RunWorkers]). Beyond one server it starts a Redis Cluster ([StartCluster]: primaries sharing
// the slots, optional replicas) and a Sentinel set-up ([StartFailover]: a primary, replicas and
// Sentinels that promote a replica 1 s after the primary stops answering), each in about 2 s,
// and, for partition tests, runs them in a network of namespaces of their own ([NewNet]).
//
// # Where the server comes from
//
//   - [Start] always starts a new server owned by the calling test. The binary is $REDIS_SERVER
//     when set, else "redis-server" on PATH. Without a binary, a Redis container is started through
//     testcontainers-go when a Docker engine answers a preflight check (image
//     $HOLDFAST_REDIS_IMAGE, default "redis:7.0"); such a server is not [Server.Controllable].
//     With neither, the test is skipped, or fails when the environment variable CI is non-empty.
//     Install Redis with `bash scripts/setup.sh` or `apt-get install redis-server`.
//
// # The container fallback is a module of its own
//
// This package does not import testcontainers-go: the Docker client and its forty-odd modules
// are required only by the nested module in ./containers, a small command that starts one Redis
// container, prints its host:port on stdout and removes the container when its stdin is closed.
// The first test that needs a container builds that command with `go build` (then, and only
// then, the Go command downloads those modules) and runs it once per server; it is removed by
// [Main]. So `go test` in integration/ downloads none of it when redis-server is installed or
// $REDIS_ADDR is set, as on CI. The preflight deciding whether the build is worth it uses the
// standard library only: $DOCKER_HOST when set, else the usual Docker sockets answering
// GET /_ping (or ~/.testcontainers.properties, which it leaves to testcontainers-go).
// `make vet-containers` compile-checks the fallback (go vet in ./containers).
//
// A build tag (-tags testcontainers) would keep the download away too, but the fallback would
// then be off unless the user knew to ask for it; a module of its own keeps it automatic.
//   - [Shared] returns one server for the whole test binary: the external server named by
//     $REDIS_ADDR (host:port; never stopped, restarted or flushed by this package), else a
//     process started on first use and stopped by [Main].
//
// # Usage
//
//	func TestMain(m *testing.M) { redistest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		srv := redistest.Start(t) // or redistest.Shared(t) for tests that do not break the server
//		rdb := srv.Client(t)
//		key := redistest.Name(t)
//		...
//	}
//
// Servers started by this package never outlive the test binary: they are stopped by
// tb.Cleanup (or [Main]) and, on Linux, receive SIGKILL when the test binary dies
// (Pdeathsig), even after a panic or a SIGKILL of the test binary.
//
// # Servers and versions
//
// The binary may be any server of holdfast's matrix: Redis 6.2, 7.0, 7.4 or Valkey 7.2, 8.0
// ($REDIS_SERVER=/path/to/valkey-server). [Server.Version] says which (from --version, or INFO
// for a server this package did not start); the harness writes only the directives the
// server accepts (enable-debug-command from 7.0 on) and forms a Cluster with commands every
// one of them has. A test that needs a newer server checks the fallback on older ones, or
// calls [Version.Needs], whose skip message begins "not for this server" and is listed by
// `make test-servers`.
//
// # Partitions: a network of namespaces
//
// [NewNet] makes a private network for Jepsen-style tests (Linux, root, ip and nft; else
// skipped, or failed under CI): a network namespace holding a bridge, and a namespace per
// host ([Net.Host]) joined to it by a veth pair, with an address in 10.99.0.0/24. No
// interface, address or route is added to the test process's namespace; the namespaces
// and what runs in them are deleted in tb.Cleanup, and those of a test binary killed
// before its cleanups are deleted by the next NewNet. Servers, Sentinels, cluster nodes
// and workers run in hosts of their own ([StartIn], [StartFailoverIn], [StartClusterIn],
// [StartWorkerIn]) while the test process talks to them from an admin host ([Net.Dialer],
// [Net.Client], and the Client and probes of the Server, Failover and Cluster). Faults are
// nft rules on the bridge: [Net.Cut] partitions two sets of hosts (packets silently
// dropped, connections left open), [Net.CutOneWay] drops one direction only, [Net.Flaky]
// drops a share of the packets at random, and [Net.Heal] removes them all. A Net with a
// server is up in about 40 ms, one with a Failover (3 Sentinels) in about 2 s.
//
// The package is Linux-oriented (process groups, Pdeathsig, SIGSTOP). It is a module of its
// own, published with holdfast (holdfastotel's tests use it); its testcontainers fallback is
// found next to its source, so it works from a checkout, not from the module cache.
package redistest
