package watchdog

import (
	"context"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// primaryEvery is how often a client through Sentinel asks the Sentinels
// which server is the primary, while it has holds.
const primaryEvery = time.Second

// sentinelAddr is the address go-redis gives a client of NewFailoverClient:
// its primary is the one the Sentinels name, and changes with them.
const sentinelAddr = "FailoverClient"

// dialer is what a client of NewFailoverClient dials with: it asks the
// Sentinels for the primary's address, then connects to it.
type dialer func(ctx context.Context, network, addr string) (net.Conn, error)

// sentinelDialer returns the dialer of rdb when it is a client of
// NewFailoverClient, else nil.
func sentinelDialer(rdb redis.UniversalClient) dialer {
	c, ok := rdb.(*redis.Client)
	if !ok || c.Options().Addr != sentinelAddr || c.Options().Dialer == nil {
		return nil
	}
	return c.Options().Dialer
}

// followPrimary is the goroutine of a watchdog whose client goes through
// Sentinel: every primaryEvery, while there are holds, it asks the Sentinels
// who the primary is (a connection made with the client's own dialer, closed
// at once), and when that is not the server the holds were renewed on, it
// moves the renewals there and looks at every hold at once. go-redis follows
// the Sentinels' +switch-master message with its own connections, but a
// message sent while the client was cut off from the Sentinels is lost:
// after a partition heals, the client would go on renewing its holds on the
// old primary, which still acts as one until a Sentinel's INFO round (up to
// 10 s) makes it a replica, while the promoted replica let them expire and
// granted them to others. The dial also makes go-redis drop its pooled
// connections to the old primary (its dialer switches the client over).
func (w *Watchdog) followPrimary(dial dialer) {
	defer w.followers.Done()
	tick := time.NewTicker(primaryEvery)
	defer tick.Stop()
	var last string
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-tick.C:
		}
		if !w.holding() {
			continue
		}
		addr, err := askPrimary(w.ctx, dial)
		if err != nil {
			continue // the Sentinels are out of reach: the deadlines are the bound
		}
		moved := last != "" && addr != last
		last = addr
		if w.trk != nil && w.trk.primaryIs(addr) {
			moved = true
		}
		if moved {
			w.renewSoon()
		}
	}
}

// askPrimary returns the address of the primary the Sentinels name, as the
// client's dialer reaches it.
func askPrimary(ctx context.Context, dial dialer) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, primaryEvery)
	defer cancel()
	cn, err := dial(ctx, "tcp", sentinelAddr)
	if err != nil {
		return "", err
	}
	addr := cn.RemoteAddr().String()
	_ = cn.Close()
	return addr, nil
}

// holding reports whether the watchdog has holds.
func (w *Watchdog) holding() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.deadline) > 0
}

// renewSoon makes the loop run a renewal round at once.
func (w *Watchdog) renewSoon() {
	select {
	case w.renewNow <- struct{}{}:
	default:
	}
}
