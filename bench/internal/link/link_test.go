package link

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/redisserver"
)

// echoServer answers every connection with what it reads, until closed.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func startLink(t *testing.T, target string, delay time.Duration) *Link {
	t.Helper()
	l, err := Start(target, delay)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return c
}

// TestOrder sends many writes of varied sizes through delaying and
// non-delaying links and checks that the echo comes back whole and in order.
func TestOrder(t *testing.T) {
	for _, d := range []time.Duration{0, time.Millisecond} {
		t.Run(d.String(), func(t *testing.T) {
			l := startLink(t, echoServer(t), d)
			c := dial(t, l.Addr())
			var want bytes.Buffer
			for i := range 2000 {
				fmt.Fprintf(&want, "%d:%s;", i, bytes.Repeat([]byte{'a' + byte(i%26)}, i%300))
			}
			errc := make(chan error, 1)
			go func() {
				b := want.Bytes()
				for len(b) > 0 {
					n := min(len(b), 1+len(b)%777)
					if _, err := c.Write(b[:n]); err != nil {
						errc <- err
						return
					}
					b = b[n:]
				}
				errc <- nil
			}()
			got := make([]byte, want.Len())
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Fatal("the bytes came back changed or out of order")
			}
		})
	}
}

// TestPipeline: a pipeline of N requests through a link with delay d
// completes in about 2·d, not N·d; one request at a time takes 2·d each.
func TestPipeline(t *testing.T) {
	const n, d = 50, 5 * time.Millisecond
	l := startLink(t, echoServer(t), d)
	c := dial(t, l.Addr())
	r := bufio.NewReader(c)
	t0 := time.Now()
	for i := range n {
		if _, err := fmt.Fprintf(c, "req %d\n", i); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("req %d\n", i); line != want {
			t.Fatalf("reply %d: %q, want %q", i, line, want)
		}
	}
	el := time.Since(t0)
	if limit := 2*d*2 + 50*time.Millisecond; el > limit {
		t.Errorf("pipeline of %d took %v, want < %v", n, el, limit)
	}
	if el < 2*d {
		t.Errorf("pipeline of %d took %v, less than the round trip %v", n, el, 2*d)
	}
	t.Logf("pipeline of %d: %v", n, el)
	t0 = time.Now()
	for i := range 3 {
		fmt.Fprintf(c, "one %d\n", i)
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	if el := time.Since(t0); el < 3*2*d {
		t.Errorf("3 sequential requests took %v, want ≥ %v", el, 3*2*d)
	}
}

// TestServerCloses: when the server ends a connection, what it wrote before
// still arrives, then the client sees the end.
func TestServerCloses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = c.Write([]byte("bye\n"))
		_ = c.Close()
	}()
	l := startLink(t, ln.Addr().String(), 2*time.Millisecond)
	c := dial(t, l.Addr())
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "bye\n" {
		t.Fatalf("read %q, %v; want \"bye\\n\", EOF", b, err)
	}
}

// TestCloseEndsGoroutines: Close ends every goroutine of the link, with
// connections open and bytes in flight.
func TestCloseEndsGoroutines(t *testing.T) {
	target := echoServer(t)
	before := runtime.NumGoroutine()
	for _, d := range []time.Duration{0, 2 * time.Millisecond} {
		l, err := Start(target, d)
		if err != nil {
			t.Fatal(err)
		}
		var conns []net.Conn
		for range 5 {
			c, err := net.Dial("tcp", l.Addr())
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
			_, _ = c.Write([]byte("in flight\n"))
		}
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		for _, c := range conns {
			_ = c.Close()
		}
	}
	// The echo server's own goroutines end once the link closed its side.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPingProfiles measures PING through each profile on a real
// redis-server and checks it against the profile's delay.
func TestPingProfiles(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("no redis-server on PATH")
	}
	ctx := context.Background()
	srv, err := redisserver.Start(ctx, bin)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	for _, p := range Profiles {
		addr := srv.Addr
		if p.Proxy {
			l := startLink(t, srv.Addr, p.Delay)
			addr = l.Addr()
		}
		info, err := Measure(ctx, p, addr, 50)
		if err != nil {
			t.Fatal(err)
		}
		t.Log(info.Line())
		if info.PingP50 < 2*p.Delay || info.PingP50 > 2*p.Delay+20*time.Millisecond {
			t.Errorf("%s: PING p50 %v, want about %v", p.Name, info.PingP50, 2*p.Delay)
		}
	}
}

func TestMain(m *testing.M) {
	if ServeProcess() {
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestProcess runs the link in a process of its own (the test binary
// re-executed) and checks a delayed round trip, the counts and the CPU.
func TestProcess(t *testing.T) {
	const d = 2 * time.Millisecond
	p, err := StartProcess(echoServer(t), d)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	r := bufio.NewReader(c)
	t0 := time.Now()
	for i := range 10 {
		fmt.Fprintf(c, "req %d\n", i)
		if line, err := r.ReadString('\n'); err != nil || line != fmt.Sprintf("req %d\n", i) {
			t.Fatalf("reply %d: %q, %v", i, line, err)
		}
	}
	if el := time.Since(t0); el < 10*2*d {
		t.Errorf("10 round trips took %v, want ≥ %v", el, 10*2*d)
	}
	_ = c.Close()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if p.Chunks < 20 || p.Bytes != 2*int64(len("req 0\n")*10) {
		t.Errorf("forwarded %d chunks, %d bytes; want ≥ 20 chunks, %d bytes", p.Chunks, p.Bytes, 2*len("req 0\n")*10)
	}
	t.Logf("link process: %d chunks, %d bytes, CPU %v", p.Chunks, p.Bytes, p.CPU())
}
