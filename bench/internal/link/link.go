// Package link puts a network link of a chosen speed between the benchmarks
// and their redis-server: a TCP proxy on a loopback port that forwards every
// connection to the server and delays each chunk of bytes, in each direction,
// by a profile's one-way delay. Bytes read at t are written at t + delay, in
// order, so a pipeline of requests crosses the link in one delay, not one
// per request.
//
// Each direction of a connection has a reader goroutine, which stamps each
// chunk it reads with its deadline and appends it to a queue, and a writer
// goroutine, which sleeps (one timer) until the deadline of the queue's head
// and then writes every chunk that is due in one write. Nothing spins or
// polls: an idle link costs no CPU, a busy one a read, a write and at most
// one timer per chunk. With no delay (profile proxy) each direction is a
// plain read-write loop.
//
// The benchmarks run the proxy in a process of its own (StartProcess), so
// that its CPU time and allocations do not count as the coordinator's.
//
// Sleeps here last at least about a millisecond (timers shorter than that
// take 1.06–1.15 ms), and the kernel has no netem: a delaying profile cannot
// be faster than about 2.5 ms per round trip.
package link

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Profile is a link's speed.
type Profile struct {
	// Name is the profile's name on the command line (-link).
	Name string
	// Proxy tells whether the link is a proxy (else clients dial the server
	// directly), Delay the one-way delay the proxy adds.
	Proxy bool
	Delay time.Duration
}

// Profiles are the profiles, fastest first: loopback (no proxy), proxy (a
// forwarding proxy, no added delay, about 0.2 ms per round trip), slow (1 ms
// each way, about 2.3 ms) and slower (2 ms each way, about 4.5 ms). Timers
// here end on about whole milliseconds plus 0.1–0.2 ms: a delay of 2.5 ms
// takes about 3.2, so slower is 2 ms.
var Profiles = []Profile{
	{Name: "loopback"},
	{Name: "proxy", Proxy: true},
	{Name: "slow", Proxy: true, Delay: time.Millisecond},
	{Name: "slower", Proxy: true, Delay: 2 * time.Millisecond},
}

// Names returns the profiles' names separated by sep.
func Names(sep string) string {
	var ns []string
	for _, p := range Profiles {
		ns = append(ns, p.Name)
	}
	return strings.Join(ns, sep)
}

// Lookup returns the profile called name.
func Lookup(name string) (Profile, error) {
	for _, p := range Profiles {
		if p.Name == name {
			return p, nil
		}
	}
	return Profile{}, fmt.Errorf("unknown link %q (have %s)", name, Names(", "))
}

// String describes the profile: "slow (1 ms each way)".
func (p Profile) String() string {
	switch {
	case !p.Proxy:
		return p.Name + " (direct)"
	case p.Delay == 0:
		return p.Name + " (forwarding proxy, no added delay)"
	}
	return fmt.Sprintf("%s (%s ms each way)", p.Name, strconv.FormatFloat(float64(p.Delay)/1e6, 'f', -1, 64))
}

// Link is a running proxy.
type Link struct {
	ln     net.Listener
	target string
	delay  time.Duration
	done   chan struct{}
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool

	chunks, bytes atomic.Int64
}

// Forwarded returns how many chunks (reads) and bytes the link has
// forwarded, both directions together.
func (l *Link) Forwarded() (chunks, bytes int64) { return l.chunks.Load(), l.bytes.Load() }

// Start listens on a free port of 127.0.0.1 and forwards each connection to
// target, delaying the bytes by delay each way.
func Start(target string, delay time.Duration) (*Link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &Link{ln: ln, target: target, delay: delay, done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

// Addr returns the address clients dial.
func (l *Link) Addr() string { return l.ln.Addr().String() }

// Close stops accepting, closes every connection and waits until every
// goroutine of the link has ended.
func (l *Link) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.done)
	err := l.ln.Close()
	for c := range l.conns {
		_ = c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
	return err
}

// track adds c to the open connections, or closes it and returns false when
// the link is closed.
func (l *Link) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = c.Close()
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *Link) untrack(cs ...net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
		delete(l.conns, c)
	}
}

func (l *Link) accept() {
	defer l.wg.Done()
	for {
		client, err := l.ln.Accept()
		if err != nil {
			return
		}
		if !l.track(client) {
			return
		}
		l.wg.Add(1)
		go l.serve(client)
	}
}

// serve dials the target for client and forwards both ways until either
// side ends; then it closes both.
func (l *Link) serve(client net.Conn) {
	defer l.wg.Done()
	server, err := net.DialTimeout("tcp", l.target, 5*time.Second)
	if err != nil {
		l.untrack(client)
		return
	}
	if !l.track(server) {
		l.untrack(client)
		return
	}
	for _, c := range []net.Conn{client, server} {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
	}
	var once sync.Once
	end := func() { once.Do(func() { l.untrack(client, server) }) }
	l.wg.Add(2)
	go l.forward(server, client, end)
	go l.forward(client, server, end)
}

// forward copies src to dst, each chunk delayed by l.delay, and calls end
// when src or dst fails (or ends).
func (l *Link) forward(dst, src net.Conn, end func()) {
	defer l.wg.Done()
	buf := make([]byte, 64<<10)
	if l.delay <= 0 {
		defer end()
		for {
			n, err := src.Read(buf)
			if n > 0 {
				l.count(n)
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	// The writer, not the reader, ends the connection: what the reader
	// queued before src ended still arrives, on time.
	q := &queue{wake: make(chan struct{}, 1)}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer end()
		q.write(dst, l.done)
	}()
	defer q.close()
	for {
		n, err := src.Read(buf)
		if n > 0 {
			l.count(n)
			q.push(time.Now().Add(l.delay), append([]byte(nil), buf[:n]...))
		}
		if err != nil {
			return
		}
	}
}

func (l *Link) count(n int) {
	l.chunks.Add(1)
	l.bytes.Add(int64(n))
}

// chunk is bytes read from one side, due on the other at deadline.
type chunk struct {
	deadline time.Time
	b        []byte
}

// queue is one direction's chunks in flight, oldest first. Deadlines grow
// along the queue, so the writer only ever waits for the head.
type queue struct {
	mu    sync.Mutex
	items []chunk
	ended bool // the reader is done: write what is left, then stop
	wake  chan struct{}
}

func (q *queue) push(deadline time.Time, b []byte) {
	q.mu.Lock()
	q.items = append(q.items, chunk{deadline, b})
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *queue) close() {
	q.mu.Lock()
	q.ended = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// write writes the chunks to dst as they fall due, until the reader ends
// and the queue is empty, a write fails, or done closes.
func (q *queue) write(dst net.Conn, done <-chan struct{}) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var bufs net.Buffers
	for {
		q.mu.Lock()
		if len(q.items) == 0 {
			ended := q.ended
			q.mu.Unlock()
			if ended {
				return
			}
			select {
			case <-q.wake:
				continue
			case <-done:
				return
			}
		}
		head := q.items[0].deadline
		q.mu.Unlock()
		if wait := time.Until(head); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-done:
				timer.Stop()
				return
			}
		}
		// Write every chunk that is due now in one write.
		now := time.Now()
		q.mu.Lock()
		i := 0
		for i < len(q.items) && !q.items[i].deadline.After(now) {
			bufs = append(bufs, q.items[i].b)
			i++
		}
		q.items = q.items[i:]
		if len(q.items) == 0 {
			q.items = nil
		}
		q.mu.Unlock()
		if _, err := bufs.WriteTo(dst); err != nil {
			return
		}
		bufs = bufs[:0]
	}
}
