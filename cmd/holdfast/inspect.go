package main

import (
	"context"
	"encoding/hex"
	"errors"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/redis/go-redis/v9"
)

// The kinds of object status reports (objectStatus.Kind, the JSON field "kind").
const (
	kindFree     = "free"               // nothing at the name (a fair lock's queue or a fencing token may remain)
	kindLock     = "lock"               // RLock's hash: Mutex, FencedMutex, NonReentrantMutex, SpinMutex (and a fair lock nobody waits for)
	kindFair     = "fair_lock"          // RLock's hash, or none, with a waiters' queue or deadlines
	kindRW       = "rw_lock"            // a hash with a "mode" field: RReadWriteLock
	kindCounter  = "semaphore_or_latch" // an integer string: RSemaphore or RCountDownLatch
	kindPermits  = "permit_semaphore"   // an integer string and its {N}:timeout zset: RPermitExpirableSemaphore
	kindSema     = "semaphore"          // status --semaphore NAME: an integer string, or no key, read as RSemaphore
	kindLatch    = "latch"              // status --latch NAME: an integer string, or no key, read as RCountDownLatch
	kindNotALock = "not_a_lock"         // a key of another type, or a hash or string of another shape
)

// maxReadTimeouts bounds the timeout keys read per reader of a read/write lock.
const maxReadTimeouts = 1000

// maxPermitsRead bounds the acquired permits read (and listed) per
// permit-expirable semaphore: the first ones by expiry.
const maxPermitsRead = 1000

// objectStatus is what status shows of one name; its JSON form is documented in
// docs/cli.md and its field names are stable.
type objectStatus struct {
	Name             string          `json:"name"`
	Kind             string          `json:"kind"`
	RedisType        string          `json:"redis_type"`     // TYPE of the key at the name: "none", "hash", "string", …
	Mode             string          `json:"mode,omitempty"` // rw_lock: "read" or "write"
	TTLMillis        int64           `json:"ttl_ms"`         // PTTL of the name: -1 no expiry, -2 no key
	Holders          []holder        `json:"holders"`
	Channel          string          `json:"channel,omitempty"` // where releases are announced
	Subscribers      int64           `json:"subscribers"`       // subscriptions to Channel: waiting clients
	Queue            []queued        `json:"queue,omitempty"`   // fair_lock: the waiters, first served first
	FencingToken     *int64          `json:"fencing_token,omitempty"`
	Value            string          `json:"value,omitempty"`            // semaphore_or_latch, permit_semaphore: the string
	AcquiredPermits  int64           `json:"acquired_permits,omitempty"` // permit_semaphore: members of {N}:timeout
	Permits          []permit        `json:"permits,omitempty"`          // permit_semaphore: the acquired permits, earliest expiry first
	LatchChannel     string          `json:"latch_channel,omitempty"`    // semaphore_or_latch: the latch's channel
	LatchSubscribers int64           `json:"latch_subscribers,omitempty"`
	SeenAs           string          `json:"seen_as,omitempty"`  // semaphore_or_latch: "semaphore" or "latch" when only that kind's channel has subscribers
	Election         *electionStatus `json:"election,omitempty"` // an election's leader, candidates and followers (status_election.go)

	as string // what the user said the name is (inspectAs): not shown
}

// permit is one acquired permit of a permit-expirable semaphore: a member of
// its {N}:timeout zset.
type permit struct {
	ID               string `json:"id"`                       // 32 lowercase hex characters (the member's 16 bytes)
	ExpiryUnixMillis *int64 `json:"expiry_unix_ms,omitempty"` // the member's score, epoch ms on its holder's clock; omitted: no lease
	ExpiresInMillis  *int64 `json:"expires_in_ms,omitempty"`  // that minus this machine's clock (negative: expired, not yet reclaimed)
	NoLease          bool   `json:"no_lease,omitempty"`       // the permit never expires (score 922337203685477)
}

// holder is one owner field of a lock's hash.
type holder struct {
	Field        string        `json:"field"`     // as in Redis: "<client id>:<owner id>[:write]"
	ClientID     string        `json:"client_id"` // the Redisson or holdfast client's UUID
	OwnerID      string        `json:"owner_id"`  // the Java thread id, or holdfast's owner id
	Side         string        `json:"side,omitempty"`
	Count        int64         `json:"count"`
	ReadTimeouts *readTimeouts `json:"read_timeouts,omitempty"`
	Holder       *holderRecord `json:"holder"`                // its client's record (service, host, pid…); null without one
	HolderNote   string        `json:"holder_note,omitempty"` // why holder is null
}

// readTimeouts are the timeout keys of one reader of a read/write lock, one per
// read hold: "{N}:<field>:rwlock_timeout:<k>".
type readTimeouts struct {
	Keys         int   `json:"keys"`       // how many of keys 1..count exist
	MinTTLMillis int64 `json:"min_ttl_ms"` // the shortest PTTL among them; -1 no expiry, -2 none exists
}

// queued is one waiter in a fair lock's queue.
type queued struct {
	Field              string        `json:"field"`
	ClientID           string        `json:"client_id"`
	OwnerID            string        `json:"owner_id"`
	DeadlineUnixMillis *int64        `json:"deadline_unix_ms,omitempty"` // its score in redisson_lock_timeout:{N}
	DeadlineInMillis   *int64        `json:"deadline_in_ms,omitempty"`   // that, minus this machine's clock
	Channel            string        `json:"channel"`                    // its own wake-up channel
	Subscribers        int64         `json:"subscribers"`
	Waiter             *holderRecord `json:"waiter"`                // its client's record; null without one
	WaiterNote         string        `json:"waiter_note,omitempty"` // why waiter is null
}

// snapshot is what one MULTI read of a name's keys found.
type snapshot struct {
	typ       string
	pttl      int64
	hash      map[string]string
	value     string
	queue     []string
	deadlines []redis.Z
	token     *int64
	permits   int64     // members of {N}:timeout
	permitSet []redis.Z // the first maxPermitsRead of them, by score
	lock      bool      // the key holds a lock's hash (lua.LockShape)
}

// inspect reads the object at name and everything status shows of it.
func inspect(ctx context.Context, rdb redis.UniversalClient, name string) (objectStatus, error) {
	return inspectAs(ctx, rdb, name, "")
}

// inspectAs is inspect of a name that the user says is a semaphore (as is
// kindSema) or a latch (kindLatch); as "" says nothing.
func inspectAs(ctx context.Context, rdb redis.UniversalClient, name, as string) (objectStatus, error) {
	snap, err := readSnapshot(ctx, rdb, name)
	if err != nil {
		return objectStatus{}, err
	}
	st := classify(name, as, snap, time.Now())
	if st.Kind == kindRW {
		if err := readTimeoutsOf(ctx, rdb, &st); err != nil {
			return objectStatus{}, err
		}
	}
	if err := countSubscribers(ctx, rdb, &st); err != nil {
		return objectStatus{}, err
	}
	if st.Kind == kindCounter {
		st.SeenAs = seenAs(st)
	}
	if err := readElection(ctx, rdb, &st); err != nil {
		return objectStatus{}, err
	}
	if err := readIdentities(ctx, rdb, &st); err != nil {
		return objectStatus{}, err
	}
	return st, nil
}

// readSnapshot reads name's keys in one MULTI, so that they agree with each other.
// Commands that meet a key of another type answer WRONGTYPE, and count as absent.
func readSnapshot(ctx context.Context, rdb redis.UniversalClient, name string) (snapshot, error) {
	var (
		typ          *redis.StatusCmd
		pttl         *redis.Cmd
		hash         *redis.MapStringStringCmd
		value, token *redis.StringCmd
		queue        *redis.StringSliceCmd
		deadlines    *redis.ZSliceCmd
		permits      *redis.IntCmd
		permitSet    *redis.ZSliceCmd
		shape        *redis.Cmd
	)
	cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		typ = p.Type(ctx, name)
		pttl = p.Do(ctx, "pttl", name)
		hash = p.HGetAll(ctx, name)
		value = p.Get(ctx, name)
		queue = p.LRange(ctx, lua.QueueName(name), 0, -1)
		deadlines = p.ZRangeWithScores(ctx, lua.TimeoutsName(name), 0, -1)
		token = p.Get(ctx, lua.TokenName(name))
		permits = p.ZCard(ctx, lua.PermitTimeoutsName(name))
		permitSet = p.ZRangeWithScores(ctx, lua.PermitTimeoutsName(name), 0, maxPermitsRead-1)
		shape = lua.LockShape(ctx, p, name)
		return nil
	})
	if err != nil && !absent(err) {
		return snapshot{}, err
	}
	for _, c := range cmds {
		if err := c.Err(); err != nil && !absent(err) {
			return snapshot{}, err
		}
	}
	s := snapshot{typ: typ.Val(), hash: hash.Val(), value: value.Val(), queue: queue.Val(),
		deadlines: deadlines.Val(), permits: permits.Val(), permitSet: permitSet.Val()}
	s.pttl, _ = pttl.Int64()
	shaped, _ := shape.Int64()
	s.lock = shaped == 1
	if t, err := token.Int64(); err == nil {
		s.token = &t
	}
	return s, nil
}

// absent reports whether err only says that a key is missing or of another type.
func absent(err error) bool {
	return errors.Is(err, redis.Nil) || redis.HasErrorPrefix(err, "WRONGTYPE")
}

// classify turns a snapshot of name into its status, without the subscriber
// counts and read timeouts, which need more reads. as is what the user says
// the name is (inspectAs).
func classify(name, as string, s snapshot, now time.Time) objectStatus {
	st := objectStatus{Name: name, RedisType: s.typ, TTLMillis: s.pttl, Holders: []holder{}, FencingToken: s.token, as: as}
	fair := len(s.queue) > 0 || len(s.deadlines) > 0
	switch s.typ {
	case "none":
		st.Kind, st.Channel = kindFree, lua.ChannelName(name)
		switch {
		case fair:
			st.Kind = kindFair
		case as != "":
			st.Kind, st.Channel = as, counterChannel(name, as)
		}
	case "hash":
		classifyHash(&st, s.hash, s.lock, fair)
	case "string":
		classifyString(&st, s, as, now)
	default:
		st.Kind = kindNotALock
	}
	if st.Kind == kindFair {
		st.Queue = queueOf(name, s.queue, s.deadlines, now)
	}
	return st
}

// classifyHash sets the kind, mode, holders and channel of a hash at st.Name;
// lock says whether it is a lock's, by the scripts' rule (lua.LockShape).
func classifyHash(st *objectStatus, h map[string]string, lock, fair bool) {
	holders, mode := parseHolders(h)
	switch {
	case !lock:
		st.Kind = kindNotALock
		return
	case mode != "":
		st.Kind, st.Mode, st.Channel = kindRW, mode, lua.RWChannelName(st.Name)
	case fair:
		st.Kind, st.Channel = kindFair, lua.ChannelName(st.Name)
	default:
		st.Kind, st.Channel = kindLock, lua.ChannelName(st.Name)
	}
	st.Holders = holders
}

// classifyString sets the kind of a string at st.Name: when it is an integer,
// a permit-expirable semaphore if permits are acquired in its zset, else what
// the user says it is (as), else a semaphore when it is 0 or less (never a
// latch's count), else a semaphore or a latch.
func classifyString(st *objectStatus, s snapshot, as string, now time.Time) {
	n, err := strconv.ParseInt(s.value, 10, 64)
	if err != nil {
		st.Kind = kindNotALock
		return
	}
	st.Value, st.Channel = s.value, lua.SemaphoreChannel(st.Name)
	switch {
	case s.permits > 0:
		st.Kind, st.AcquiredPermits, st.Permits = kindPermits, s.permits, permitsOf(s.permitSet, now)
	case as != "":
		st.Kind, st.Channel = as, counterChannel(st.Name, as)
	case n <= 0:
		st.Kind = kindSema // a latch's key is deleted when its count reaches 0: a count of 0 or less is a semaphore's
	default:
		st.Kind, st.LatchChannel = kindCounter, lua.LatchChannel(st.Name)
	}
}

// seenAs is what the subscribers of the channels of a semaphore_or_latch st
// show it is: "semaphore" when clients wait for permits and none awaits the
// latch, "latch" the other way round, else "".
func seenAs(st objectStatus) string {
	switch {
	case st.Subscribers > 0 && st.LatchSubscribers == 0:
		return kindSema
	case st.LatchSubscribers > 0 && st.Subscribers == 0:
		return kindLatch
	}
	return ""
}

// counterChannel is the channel of name read as a semaphore or a latch (as).
func counterChannel(name, as string) string {
	if as == kindLatch {
		return lua.LatchChannel(name)
	}
	return lua.SemaphoreChannel(name)
}

// noLeaseScore is the score of a permit without a lease in {N}:timeout
// (protocol §1.9, §2.12).
const noLeaseScore = 922337203685477

// permitsOf returns the permits of a {N}:timeout zset, in its order (earliest
// expiry first), with their expiries on now's clock.
func permitsOf(set []redis.Z, now time.Time) []permit {
	ps := make([]permit, 0, len(set))
	for _, z := range set {
		m, _ := z.Member.(string)
		p := permit{ID: permitID(m)}
		if score := int64(z.Score); score == noLeaseScore {
			p.NoLease = true
		} else {
			in := score - now.UnixMilli()
			p.ExpiryUnixMillis, p.ExpiresInMillis = &score, &in
		}
		ps = append(ps, p)
	}
	return ps
}

// permitID renders a permit's zset member as users write its id: the 16 raw
// bytes of Redisson >= 3.17 as 32 lowercase hex characters; any other member
// (the hex text of older Redisson) as it is when printable, else in hex.
func permitID(member string) string {
	if len(member) != 16 {
		printable := true
		for _, r := range member {
			printable = printable && r > ' ' && r < 0x7f
		}
		if printable && member != "" {
			return member
		}
	}
	return hex.EncodeToString([]byte(member))
}

// parseHolders reads a lock's hash (one that lua.LockShape accepts): its
// holders (the writer first, then by field) and its "mode" field.
func parseHolders(h map[string]string) (holders []holder, mode string) {
	mode, hasMode := h["mode"]
	holders = []holder{}
	for f, v := range h {
		if f == "mode" {
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		hd := holder{Field: f, Count: n}
		write := false
		hd.ClientID, hd.OwnerID, write = splitField(f)
		if hasMode {
			hd.Side = map[bool]string{true: "write", false: "read"}[write]
		}
		holders = append(holders, hd)
	}
	sort.Slice(holders, func(i, j int) bool {
		if wi, wj := holders[i].Side == "write", holders[j].Side == "write"; wi != wj {
			return wi
		}
		return holders[i].Field < holders[j].Field
	})
	return holders, mode
}

// splitField splits an owner field "<client id>:<owner id>" or
// "<client id>:<owner id>:write" into its parts.
func splitField(f string) (clientID, ownerID string, write bool) {
	base, write := strings.CutSuffix(f, lua.WriteSuffix)
	i := strings.LastIndexByte(base, ':')
	if i < 0 {
		return base, "", write
	}
	return base[:i], base[i+1:], write
}

// queueOf returns a fair lock's waiters in queue order, each with its deadline
// from the zset.
func queueOf(name string, fields []string, deadlines []redis.Z, now time.Time) []queued {
	score := make(map[string]int64, len(deadlines))
	for _, z := range deadlines {
		if m, ok := z.Member.(string); ok {
			score[m] = int64(z.Score)
		}
	}
	q := make([]queued, 0, len(fields))
	for _, f := range fields {
		w := queued{Field: f, Channel: lua.WaiterChannel(name, f)}
		w.ClientID, w.OwnerID, _ = splitField(f)
		if d, ok := score[f]; ok {
			in := d - now.UnixMilli()
			w.DeadlineUnixMillis, w.DeadlineInMillis = &d, &in
		}
		q = append(q, w)
	}
	return q
}

// readTimeoutsOf reads the timeout keys of each reader of the read/write lock st.
func readTimeoutsOf(ctx context.Context, rdb redis.UniversalClient, st *objectStatus) error {
	cmds := make([][]*redis.Cmd, len(st.Holders))
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, h := range st.Holders {
			if h.Side != "read" {
				continue
			}
			for k := 1; k <= int(min(h.Count, maxReadTimeouts)); k++ {
				cmds[i] = append(cmds[i], p.Do(ctx, "pttl", lua.ReadTimeoutName(st.Name, h.Field, k)))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := range st.Holders {
		if st.Holders[i].Side == "read" {
			st.Holders[i].ReadTimeouts = summarize(cmds[i])
		}
	}
	return nil
}

// summarize counts the keys whose PTTL replies are in cmds, and their shortest PTTL.
func summarize(cmds []*redis.Cmd) *readTimeouts {
	rt := &readTimeouts{MinTTLMillis: -2}
	for _, c := range cmds {
		ttl, _ := c.Int64()
		switch {
		case ttl == -2:
			continue
		case ttl == -1 && rt.Keys == 0:
			rt.MinTTLMillis = -1
		case ttl >= 0 && (rt.MinTTLMillis < 0 || ttl < rt.MinTTLMillis):
			rt.MinTTLMillis = ttl
		}
		rt.Keys++
	}
	return rt
}
