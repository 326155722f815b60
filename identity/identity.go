package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Prefix begins the key of every client's record.
const Prefix = "holdfast:client:"

// Life is how long a record outlives its last refresh; Refresh is how often a
// Keeper refreshes it; Delay is how long a Keeper waits before its first
// write: a client whose holds are all shorter (a test, a tight loop of short
// critical sections) writes nothing, and the question "who holds it" is asked
// of holds that last.
const (
	Life    = 30 * time.Second
	Refresh = 10 * time.Second
	Delay   = time.Second
)

// Record is what a client says of itself.
type Record struct {
	Client  string    `json:"client"`  // the client's id: the UUID of its owner fields
	Service string    `json:"service"` // rlock.WithService; default the program's name
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Version string    `json:"version"` // holdfast's module version
	Started time.Time `json:"started"` // when the client was made
}

// Key returns the key of the record of the client whose id is client.
func Key(client string) string { return Prefix + client }

// Self returns the record of a client of this process whose id is client,
// started now; service "" is the program's name.
func Self(client, service string) Record {
	host, _ := os.Hostname()
	return Record{
		Client:  client,
		Service: ServiceName(service),
		Host:    host,
		PID:     os.Getpid(),
		Version: Version(),
		Started: time.Now().UTC().Truncate(time.Millisecond),
	}
}

// ServiceName returns service, or the program's name when service is "".
func ServiceName(service string) string {
	if service != "" {
		return service
	}
	if len(os.Args) > 0 && os.Args[0] != "" {
		return filepath.Base(os.Args[0])
	}
	return "unknown"
}

// Version returns holdfast's module version in this binary: the version a
// go.mod requires, or "(devel)" when holdfast is the main module.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	const module = "github.com/holdfast-go/holdfast"
	if bi.Main.Path == module {
		return "(devel)"
	}
	for _, d := range bi.Deps {
		if d.Path == module {
			return d.Version
		}
	}
	return "(devel)"
}

// String names the client as people read it:
// "orders-svc on host-3, pid 4121, since 12:03:11".
func (r Record) String() string {
	since := r.Started.Local().Format("15:04:05")
	if time.Since(r.Started) > 24*time.Hour {
		since = r.Started.Local().Format("2006-01-02 15:04:05")
	}
	return fmt.Sprintf("%s on %s, pid %d, since %s", r.Service, r.Host, r.PID, since)
}

// ConnName returns the name a connection of this client gives itself (CLIENT
// SETNAME) for its role: "holdfast:orders-svc:1a2b3c4d:tracking". CLIENT LIST
// then shows whose it is; the server allows no spaces in a name.
func (r Record) ConnName(role string) string {
	id, _, _ := strings.Cut(r.Client, "-")
	svc := strings.Map(func(c rune) rune {
		if c <= ' ' || c > '~' {
			return '_'
		}
		return c
	}, r.Service)
	return "holdfast:" + svc + ":" + id + ":" + role
}

// Read returns the records of clients found in Redis, by client id, in one
// pipelined round trip; a client without a record is not in the map. A key
// that holds something other than a record is an error for that client only
// (ErrNotARecord, in errs).
func Read(ctx context.Context, rdb redis.Cmdable, clients ...string) (map[string]Record, error) {
	out := make(map[string]Record, len(clients))
	if len(clients) == 0 {
		return out, nil
	}
	pipe := rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(clients))
	for i, c := range clients {
		cmds[i] = pipe.Get(ctx, Key(c))
	}
	_, err := pipe.Exec(ctx)
	if err != nil && !errors.Is(err, redis.Nil) && !isWrongType(err) {
		return nil, err
	}
	var errs []error
	for i, cmd := range cmds {
		b, err := cmd.Bytes()
		if errors.Is(err, redis.Nil) {
			continue
		}
		var r Record
		if err == nil {
			err = json.Unmarshal(b, &r)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %s: %v", ErrNotARecord, Key(clients[i]), err))
			continue
		}
		out[clients[i]] = r
	}
	return out, errors.Join(errs...)
}

// ErrNotARecord: a record's key holds something else.
var ErrNotARecord = errors.New("identity: not a client record")

func isWrongType(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE") }
