package watchdog

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// invalidateChannel is where the server sends the invalidations of a client
// that asked for them to be redirected (CLIENT TRACKING ... REDIRECT).
const invalidateChannel = "__redis__:invalidate"

// The roles of the tracker's connections to each node, which end their
// client names (CLIENT SETNAME, when the server allows it: Options.Name, a
// colon, the role), as CLIENT LIST shows them: ReaderRole's reads are
// tracked, NewsRole's connection is subscribed to __redis__:invalidate.
const (
	ReaderRole = "tracking"
	NewsRole   = "invalidations"
)

// staleAfter is how often a node's listener wakes, when nothing comes, to
// replace a subscription found on another server than the tracked reads.
const staleAfter = time.Second

// node is one Redis server the holds' keys live on, and the tracker's two
// connections to it: reader, whose reads the server tracks and whose
// invalidations it redirects to news, subscribed to __redis__:invalidate.
//
// Both dial as the user's client does, so through Sentinel they follow the
// primary. A redirection only works within one server: reader turns tracking
// on only towards a news connection on the same server (same run_id), and
// when they are not, both dial again. Each connection, when it is made again
// (a reconnect, a restart, a failover), makes the tracker look at every hold:
// the news that came meanwhile may be lost.
type node struct {
	t      *tracker
	addr   string // as go-redis names the server ("FailoverClient" through Sentinel)
	reader *redis.Client
	news   *redis.Client

	at     atomic.Pointer[newsConn] // news' current connection, once made
	on     atomic.Pointer[string]   // the run_id of reader's server, once it tracks
	dialed atomic.Pointer[string]   // the address reader's last connection reached, through Sentinel
	stale  atomic.Bool              // news is not on reader's server: dial again
	mode   atomic.Uint32

	mu     sync.Mutex
	ps     *redis.PubSub // news' subscription, replaced when stale
	closed bool
}

// newsConn is one connection of news: its id and its server's run_id.
type newsConn struct {
	id  int64
	run string
}

// nodeSet is the tracker's nodes (servers): one per server the holds' keys
// live on, made on first use.
type nodeSet struct {
	t         *tracker
	rdb       redis.UniversalClient
	listeners sync.WaitGroup // every node's listener

	mu     sync.Mutex
	byAddr map[string]*node
}

// newNodeSet returns the nodes of t's holds on rdb, none made yet.
func newNodeSet(t *tracker, rdb redis.UniversalClient) *nodeSet {
	return &nodeSet{t: t, rdb: rdb, byAddr: make(map[string]*node)}
}

// of returns the node that holds key, making it on first use.
func (s *nodeSet) of(ctx context.Context, key string) (server, error) {
	c, ok := s.rdb.(*redis.Client)
	if !ok {
		var err error
		if c, err = s.rdb.(*redis.ClusterClient).MasterForKey(ctx, key); err != nil {
			return nil, err
		}
	}
	addr := c.Options().Addr
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.byAddr[addr]; n != nil {
		return n, nil
	}
	n := newNode(s, addr, c.Options())
	s.byAddr[addr] = n
	return n, nil
}

// primaryIs is tracker.primaryIs.
func (s *nodeSet) primaryIs(addr string) bool {
	s.mu.Lock()
	n := s.byAddr[sentinelAddr]
	if n == nil || n.remote() == "" || n.remote() == addr {
		s.mu.Unlock()
		return false
	}
	delete(s.byAddr, sentinelAddr)
	s.mu.Unlock()
	if log := s.t.log; log != nil {
		log.Warn(observe.EventTracking, observe.AttrNode, sentinelAddr,
			"error", "the Sentinels name another primary than the server the tracker reads (a failover): dialling again")
	}
	n.close()
	s.t.changed(nil) // the holds are looked at on the new node
	return true
}

// close closes every node's connections and waits for their listeners.
func (s *nodeSet) close() {
	s.mu.Lock()
	nodes := make([]*node, 0, len(s.byAddr))
	for _, n := range s.byAddr {
		nodes = append(nodes, n)
	}
	s.mu.Unlock()
	for _, n := range nodes {
		n.close()
	}
	s.listeners.Wait()
}

// newNode makes the clients of the node at addr, whose options are opts, and
// starts its listener, which dials. s.mu is held.
func newNode(s *nodeSet, addr string, opts *redis.Options) *node {
	t := s.t
	n := &node{t: t, addr: addr}
	ro, no := *opts, *opts
	// The user's client changes its maintenance-notification config as it
	// connects (under its own lock); each of these clients gets its own, off:
	// copying the shared one would race with that change.
	ro.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	no.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	ro.PoolSize, ro.MinIdleConns, ro.MaxIdleConns, ro.MaxActiveConns = 1, 0, 1, 1
	ro.PipelinePoolSize = -1 // the checks' pipelines on that one tracked connection
	ro.ConnMaxIdleTime = -1
	ro.OnConnect = connected(opts.OnConnect, t.w.opts.Name+":"+ReaderRole, n.readerConnected)
	if dial := opts.Dialer; addr == sentinelAddr && dial != nil {
		ro.Dialer = func(ctx context.Context, network, a string) (net.Conn, error) {
			cn, err := dial(ctx, network, a)
			if err == nil {
				remote := cn.RemoteAddr().String()
				n.dialed.Store(&remote)
			}
			return cn, err
		}
	}
	no.PoolSize, no.MinIdleConns, no.MaxIdleConns, no.Protocol = 1, 0, 1, 2
	no.OnConnect = connected(opts.OnConnect, t.w.opts.Name+":"+NewsRole, n.newsConnected)
	n.reader, n.news = redis.NewClient(&ro), redis.NewClient(&no)
	s.listeners.Go(n.listen)
	return n
}

// tracks reports false once the server refused tracking.
func (n *node) tracks() bool { return n.mode.Load() != modeRefused }

// conn is the node's reader: the renewals of its holds go through it.
func (n *node) conn() pipeliner { return n.reader }

// look runs check.lua on each batch in one pipelined round trip on reader
// (see server), and once more after loading the script when the server lost
// its script cache.
func (n *node) look(ctx context.Context, batches [][]lua.Renewal, sent time.Time) ([][]int64, error) {
	lefts, noScript, err := n.lookOnce(ctx, batches, sent)
	if noScript && lua.LoadCheck(ctx, n.reader) == nil {
		lefts, _, err = n.lookOnce(ctx, batches, sent)
	}
	return lefts, err
}

// lookOnce is one try of look; noScript when the server had not the script.
func (n *node) lookOnce(ctx context.Context, batches [][]lua.Renewal, sent time.Time) (lefts [][]int64, noScript bool, err error) {
	pipe := n.reader.Pipeline()
	cmds := make([]*redis.Cmd, len(batches))
	for i, b := range batches {
		cmds[i] = lua.CheckCmd(ctx, pipe, b, sent)
	}
	_, err = pipe.Exec(ctx)
	lefts = make([][]int64, len(cmds))
	for i, cmd := range cmds {
		if left, err := lua.CheckResult(cmd); err == nil {
			lefts[i] = left
		}
	}
	return lefts, lua.IsNoScript(cmds[0].Err()), err
}

// remote returns the address of the server the reader's last connection
// reached through Sentinel; "" when unknown.
func (n *node) remote() string {
	if p := n.dialed.Load(); p != nil {
		return *p
	}
	return ""
}

// runID returns the run_id of the server c's commands reach.
func runID(ctx context.Context, c interface {
	Info(ctx context.Context, section ...string) *redis.StringCmd
}) (string, error) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, "run_id:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", nil
}

// connected returns the OnConnect of one of the node's clients: the user's
// own OnConnect, then the client name (for CLIENT LIST's readers; an ACL may
// refuse it), then f.
func connected(user func(context.Context, *redis.Conn) error, name string, f func(context.Context, *redis.Conn) error) func(context.Context, *redis.Conn) error {
	return func(ctx context.Context, cn *redis.Conn) error {
		if user != nil {
			if err := user(ctx, cn); err != nil {
				return err
			}
		}
		_ = cn.ClientSetName(ctx, name).Err()
		return f(ctx, cn)
	}
}

// newsConnected records news' connection when it connects. A server without
// CLIENT ID cannot redirect: the node stays with the renewals.
func (n *node) newsConnected(ctx context.Context, cn *redis.Conn) error {
	id, err := cn.ClientID(ctx).Result()
	if refused(err) {
		n.setMode(err)
		return nil
	} else if err != nil {
		return err
	}
	run, err := runID(ctx, cn)
	if err != nil && !refused(err) {
		return err
	}
	n.at.Store(&newsConn{id: id, run: run})
	return nil
}

// readerConnected turns tracking on for a new connection of reader and makes
// the tracker look at every hold: the server tracks nothing for the new
// connection yet.
func (n *node) readerConnected(ctx context.Context, cn *redis.Conn) error {
	err := n.track(ctx, cn)
	n.t.changed(nil)
	if refused(err) {
		return nil
	}
	return err
}

// track turns tracking on for reader's connection cn, redirected to news'
// connection if it is on the same server; if not, it asks both to dial again.
func (n *node) track(ctx context.Context, cn *redis.Conn) error {
	at := n.at.Load()
	if at == nil {
		return nil // news' subscription tracks it when it comes
	}
	run, err := runID(ctx, cn)
	if err != nil {
		return err
	}
	if run != at.run {
		n.stale.Store(true) // news subscribes again within staleAfter
		if id, err := cn.ClientID(ctx).Result(); err == nil {
			_ = cn.ClientKillByFilter(ctx, "ID", strconv.FormatInt(id, 10)).Err() // and reader dials again
		}
		return errNotTogether
	}
	err = cn.Do(ctx, "CLIENT", "TRACKING", "ON", "REDIRECT", at.id, "NOLOOP").Err()
	n.setMode(err)
	if err == nil {
		n.on.Store(&run)
	}
	return err
}

// errNotTogether: reader and news are connected to different servers (a
// failover, through Sentinel, that one of them followed).
var errNotTogether = errors.New("watchdog: tracking: the reads and the subscription are on different servers")

// refused reports whether err is the server's answer (it refused a command),
// not a broken connection.
func refused(err error) bool {
	var reply redis.Error
	return errors.As(err, &reply)
}

// listen is the node's listener: it subscribes news, and replaces the
// subscription when it is on another server than reader's.
func (n *node) listen() {
	for ps := n.subscribe(); ps != nil; ps = n.subscribe() {
		n.receive(ps)
	}
}

// subscribe replaces news' subscription by a new one; nil once the node is
// closed.
func (n *node) subscribe() *redis.PubSub {
	n.mu.Lock()
	if n.ps != nil {
		_ = n.ps.Close()
	}
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.ps = n.news.Subscribe(n.t.w.ctx) // no channel yet: it dials below, off n.mu
	ps := n.ps
	n.mu.Unlock()
	n.stale.Store(false)
	_ = ps.Subscribe(n.t.w.ctx, invalidateChannel) // a failure shows in Receive, which dials again
	return ps
}

// receive passes on what ps receives: invalidations, and a (re)subscription,
// which redirects reader's tracking to it and makes the tracker look at every
// hold. It returns when the node closes or ps is stale.
func (n *node) receive(ps *redis.PubSub) {
	ctx := n.t.w.ctx
	for ctx.Err() == nil {
		msg, err := ps.ReceiveTimeout(ctx, staleAfter)
		if err != nil {
			if !n.failed(err) {
				return
			}
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			n.redirect(ctx)
		case *redis.Message:
			if m.Channel == invalidateChannel {
				n.t.changed(m.PayloadSlice)
			}
		}
	}
}

// failed handles an error of Receive; false when the subscription must be
// replaced (stale) or the node is closing.
func (n *node) failed(err error) bool {
	ctx := n.t.w.ctx
	var ne net.Error
	switch {
	case ctx.Err() != nil:
		return false
	case errors.As(err, &ne) && ne.Timeout():
		return !n.stale.Load()
	case strings.Contains(err.Error(), "unsupported pubsub message payload"):
		n.t.changed(nil) // a null invalidation: FLUSHALL or FLUSHDB, every key
		return true
	}
	n.t.changed(nil) // the connection broke: news may be lost; Receive dials again
	select {
	case <-ctx.Done():
		return false
	case <-time.After(retryPause): // pacing a server that keeps refusing
		return true
	}
}

// redirect turns reader's tracking on again, redirected to news' current
// connection, and makes the tracker look at every hold.
func (n *node) redirect(ctx context.Context) {
	cn := n.reader.Conn()
	defer cn.Close()
	_ = cn.Do(ctx, "CLIENT", "TRACKING", "OFF").Err() // dials reader if need be, which tracks already
	_ = n.track(ctx, cn)
	n.t.changed(nil)
}

// The modes of a node, as its observer hears them.
const (
	modeUnknown uint32 = iota
	modeTracking
	modeRefused
)

// setMode records whether the server accepted tracking (err nil), logging a
// refusal once and telling the observer of every change.
func (n *node) setMode(err error) {
	mode, om := modeTracking, observe.TrackingOn
	switch {
	case err == nil:
	case refused(err) && strings.Contains(err.Error(), "does not exist"):
		return // news reconnected meanwhile: its subscription redirects again
	case refused(err):
		mode, om = modeRefused, observe.TrackingRefused
	default:
		return // the connection broke: it dials again and tries again
	}
	if old := n.mode.Swap(mode); old == mode {
		return
	}
	if mode == modeRefused && n.t.log != nil && !n.t.w.opts.QuietRefused {
		n.t.log.Warn(observe.EventTracking, observe.AttrNode, n.addr, observe.AttrTracking, om.String(), "error", err)
	}
	if n.t.obs != nil {
		n.t.obs.Tracking(n.addr, om)
	}
}

// close closes the node's connections; its listener then returns.
func (n *node) close() {
	n.mu.Lock()
	n.closed = true
	if n.ps != nil {
		_ = n.ps.Close()
	}
	n.mu.Unlock()
	_ = n.news.Close()
	_ = n.reader.Close()
}
