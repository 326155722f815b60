package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// defaultRedisURL is the server used without --redis and REDIS_URL.
const defaultRedisURL = "redis://localhost:6379"

// connFlags are the connection flags every subcommand shares.
type connFlags struct {
	urls       string        // --redis: one URL, or several (comma-separated) for a Cluster or the Sentinels
	masterName string        // --master-name: the Sentinel master; the URLs are then the Sentinels'
	cluster    bool          // --cluster: a Cluster even with a single seed URL
	timeout    time.Duration // --connect-timeout: dial and first PING
}

// register adds the connection flags to fs, whose --redis defaults, after
// $REDIS_URL, to fallback (defaultRedisURL; the demo's embedded server).
func (f *connFlags) register(fs *flag.FlagSet, fallback string) {
	fs.StringVar(&f.urls, "redis", "", "Redis `URL` (redis:// or rediss://, with user:password@ if needed); several, comma-separated, for a Cluster "+
		"or for the Sentinels with --master-name (default $REDIS_URL, else "+fallback+")")
	fs.StringVar(&f.masterName, "master-name", "", "Sentinel master `name`: --redis then lists the Sentinels")
	fs.BoolVar(&f.cluster, "cluster", false, "the server is a Redis Cluster (implied by several --redis URLs)")
	durationVar(fs, &f.timeout, "connect-timeout", 5*time.Second, "the `DURATION` to wait for the server to answer")
}

// check returns the usage error of the flags, if any, without I/O: a URL that
// cannot be parsed (of --redis, else of REDIS_URL from env), a zero timeout.
func (f *connFlags) check(env func(string) string) error {
	if f.timeout <= 0 {
		return errors.New("--connect-timeout must be more than 0")
	}
	_, err := f.options(f.urlList(env))
	return err
}

// urlList returns the server URLs: --redis, else REDIS_URL from env, else
// defaultRedisURL.
func (f *connFlags) urlList(env func(string) string) string {
	switch {
	case f.urls != "":
		return f.urls
	case env("REDIS_URL") != "":
		return env("REDIS_URL")
	}
	return defaultRedisURL
}

// errConn is the class of connection failures: exitUnavailable.
var errConn = errors.New("cannot reach Redis")

// open returns a client for the flags (REDIS_URL from env when --redis is not
// set) after a PING answered: an error says in one line what is wrong, and
// matches errConn when the server could not be reached or refused the login,
// else is a usage error (a bad URL).
func (f *connFlags) open(ctx context.Context, env func(string) string) (redis.UniversalClient, error) {
	urls := f.urlList(env)
	rdb, err := f.client(urls)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("%w at %s: %s", errConn, redact(urls), connReason(err))
	}
	return rdb, nil
}

// options parses urls, comma-separated, into the options of their clients.
func (f *connFlags) options(urls string) ([]*redis.Options, error) {
	list := strings.Split(urls, ",")
	opts := make([]*redis.Options, len(list))
	for i, u := range list {
		o, err := redis.ParseURL(strings.TrimSpace(u))
		if err != nil {
			return nil, fmt.Errorf("bad --redis URL %q: %v", redact(u), err)
		}
		o.DialTimeout = f.timeout
		// Without it the connection's handshake (HELLO) waits for the 5 s read
		// timeout, whatever the ping's deadline: a server that accepts and never
		// answers would outlast --connect-timeout.
		o.ContextTimeoutEnabled = true
		opts[i] = o
	}
	return opts, nil
}

// client builds the go-redis client of urls, comma-separated, without any I/O.
func (f *connFlags) client(urls string) (redis.UniversalClient, error) {
	opts, err := f.options(urls)
	if err != nil {
		return nil, err
	}
	first := opts[0]
	addrs := make([]string, len(opts))
	for i, o := range opts {
		addrs[i] = o.Addr
	}
	switch {
	case f.masterName != "":
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: f.masterName, SentinelAddrs: addrs, Username: first.Username, Password: first.Password,
			DB: first.DB, TLSConfig: first.TLSConfig, DialTimeout: f.timeout, ContextTimeoutEnabled: true,
		}), nil
	case f.cluster || len(opts) > 1:
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: addrs, Username: first.Username, Password: first.Password,
			TLSConfig: first.TLSConfig, DialTimeout: f.timeout, ContextTimeoutEnabled: true,
		}), nil
	}
	return redis.NewClient(first), nil
}

// connReason says in a few words why a PING failed.
func connReason(err error) string {
	var ne net.Error
	switch {
	case redis.HasErrorPrefix(err, "WRONGPASS"), redis.HasErrorPrefix(err, "NOAUTH"):
		return "authentication refused (check the user and password in the URL): " + err.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "no answer in time (is the server up, and the address right?)"
	}
	return err.Error()
}

// redact hides the password of URLs for messages.
func redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, u := range parts {
		if at := strings.LastIndex(u, "@"); at >= 0 {
			if scheme := strings.Index(u, "://"); scheme >= 0 && scheme < at {
				userinfo := u[scheme+3 : at]
				if c := strings.Index(userinfo, ":"); c >= 0 {
					parts[i] = u[:scheme+3] + userinfo[:c] + ":***" + u[at:]
				}
			}
		}
	}
	return strings.Join(parts, ",")
}

// silentRedisLog drops go-redis' own log lines (a failed dial logs one per
// attempt), so that a failure is reported in the command's one line.
type silentRedisLog struct{}

// Printf drops the message.
func (silentRedisLog) Printf(context.Context, string, ...any) {}
