package redistest

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy in front of a server, for fault injection in tests: point a client at
// Proxy.Addr instead of the server's address.
//
// Client→server bytes are always forwarded. Server→client bytes are forwarded in chunks, one
// chunk per successful read from the server socket; for request/reply traffic without
// pipelining a chunk is one reply. The fault switches apply to the chunks read after they are
// set, on every connection.
type Proxy struct {
	// Addr is the proxy's listening address (127.0.0.1:port).
	Addr string

	upstream string
	ln       net.Listener
	ctx      context.Context // cancelled by Close, aborts dials
	cancel   context.CancelFunc
	wg       sync.WaitGroup // accept loop and connection goroutines

	mu           sync.Mutex
	closed       bool
	conns        map[*proxyConn]struct{}
	dropReplies  int           // replies still to swallow
	dropAll      bool          // swallow everything from the server
	dropped      int           // chunks swallowed so far
	replyDelay   time.Duration // hold each chunk from the server this long
	delayNext    int           // chunks still to hold for delayNextBy (DelayNextReplies)
	delayNextBy  time.Duration
	dropRequests bool // discard everything from the clients
}

// proxyConn is one client connection and its upstream connection.
type proxyConn struct {
	client net.Conn

	mu     sync.Mutex
	server net.Conn // nil until dialled
	closed bool
}

// setServer records the upstream connection; it returns false (and closes server) when c was
// closed while dialling.
func (c *proxyConn) setServer(server net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		_ = server.Close()
		return false
	}
	c.server = server
	return true
}

// close resets both sides (RST rather than FIN), once.
func (c *proxyConn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	for _, conn := range []net.Conn{c.client, c.server} {
		if conn == nil {
			continue
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = conn.Close()
	}
}

// NewProxy starts a proxy listening on 127.0.0.1:0 that forwards to upstream (host:port).
// It is closed at the end of the test; Close stops all its goroutines.
func NewProxy(tb testing.TB, upstream string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("redistest: proxy listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		Addr:     ln.Addr().String(),
		ctx:      ctx,
		cancel:   cancel,
		upstream: upstream,
		ln:       ln,
		conns:    make(map[*proxyConn]struct{}),
	}
	p.wg.Add(1)
	go p.acceptLoop()
	tb.Cleanup(p.Close)
	return p
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		c := &proxyConn{client: client}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.close()
			return
		}
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(c)
	}
}

// serve dials the upstream for c and pumps bytes both ways until either side ends.
func (p *Proxy) serve(c *proxyConn) {
	defer p.wg.Done()
	defer func() {
		c.close()
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	d := net.Dialer{Timeout: 5 * time.Second}
	server, err := d.DialContext(p.ctx, "tcp", p.upstream)
	if err != nil {
		return
	}
	if !c.setServer(server) {
		return // CloseConns or Close ran while we dialled
	}

	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.forwardRequests(c.client, server)
		c.close()
	}()

	buf := make([]byte, 64<<10)
	for {
		n, err := server.Read(buf)
		if d := p.delay(); n > 0 && d > 0 {
			select {
			case <-time.After(d):
			case <-p.ctx.Done():
				return
			}
		}
		if n > 0 && !p.swallow() {
			if _, werr := c.client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// forwardRequests copies client→server bytes, discarding them while requests are dropped.
func (p *Proxy) forwardRequests(client, server net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 && !p.dropsRequests() {
			if _, werr := server.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) dropsRequests() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropRequests
}

// swallow decides whether the chunk just read from the server is discarded.
func (p *Proxy) swallow() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.dropAll:
	case p.dropReplies > 0:
		p.dropReplies--
	default:
		return false
	}
	p.dropped++
	return true
}

// DropReplies makes the proxy read and discard the next n reply chunks from the server to any
// client: the commands run on the server but their clients never see the replies (they time
// out). Used to prove idempotency when go-redis retries a timed-out command. Each call replaces
// the previous count.
func (p *Proxy) DropReplies(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropReplies = n
}

// PendingDrops returns how many of the replies ordered by [Proxy.DropReplies] are still to be
// discarded; poll it to know that a command reached the server and its reply was swallowed.
func (p *Proxy) PendingDrops() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropReplies
}

// Dropped returns how many reply chunks the proxy has discarded so far.
func (p *Proxy) Dropped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

// SetReplyDelay holds every server→client chunk read from now on for d before forwarding it
// (0 turns it off): commands run on the server at once, their replies arrive d late, and a
// client whose read timeout exceeds d sees them. Chunks of one connection stay in order.
func (p *Proxy) SetReplyDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.replyDelay = d
}

// DelayNextReplies holds the next n server→client chunks (on any connection) for
// d each, whatever the time at which they are read: unlike SetReplyDelay, no race
// between the test turning the delay off and the proxy reading the reply. Each
// call replaces the previous count.
func (p *Proxy) DelayNextReplies(n int, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delayNext, p.delayNextBy = n, d
}

// delay is how long to hold the chunk just read: one of those DelayNextReplies
// asked for, else SetReplyDelay's.
func (p *Proxy) delay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.delayNext > 0 {
		p.delayNext--
		return p.delayNextBy
	}
	return p.replyDelay
}

// SetDropRequests discards all client→server bytes while on: commands never reach the
// server and their clients time out (Redis unreachable, the connection still open). A
// command cut in the middle leaves its connection unusable: call CloseConns after turning it
// off.
func (p *Proxy) SetDropRequests(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropRequests = on
}

// SetDropAll black-holes all server→client bytes while on: connections stay open, commands run
// on the server, clients see nothing (a one-way partition after the request).
func (p *Proxy) SetDropAll(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropAll = on
}

// CloseConns resets every current connection (both the client and the server side). New
// connections are still accepted.
func (p *Proxy) CloseConns() {
	p.mu.Lock()
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
		delete(p.conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// Conns returns the number of connections currently proxied.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close stops accepting, resets every connection and waits until all the proxy's goroutines
// have returned. Safe to call more than once.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	_ = p.ln.Close()
	p.CloseConns()
	p.wg.Wait()
}
