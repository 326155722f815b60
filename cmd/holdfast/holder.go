package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/identity"
	"github.com/redis/go-redis/v9"
)

// holderRecord is what the client of an owner field says of itself, from its
// record at identity.Key(client id): status --json's "holder" (and a queued
// waiter's "waiter").
type holderRecord struct {
	Service string    `json:"service"`
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Version string    `json:"version"`
	Started time.Time `json:"started"`
}

// noRecord says what a client without a record is.
const noRecord = "no record: a client that is gone, or one that does not write one (Redisson/Java, an older holdfast)"

// clientRecords are the records read for some client ids: each id has a record
// or a note that says why it has none.
type clientRecords struct {
	found map[string]identity.Record
	notes map[string]string
}

// readRecords reads the records of clients in one round trip
// (identity.Read). It fails only when the server could not be reached: a
// record refused (an ACL's NOPERM) or not a record is a note of its client.
func readRecords(ctx context.Context, rdb redis.UniversalClient, clients []string) (clientRecords, error) {
	slices.Sort(clients)
	clients = slices.Compact(clients)
	found, err := identity.Read(ctx, rdb, clients...)
	recs := clientRecords{found: found, notes: make(map[string]string)}
	switch {
	case err != nil && connFailure(err):
		return clientRecords{}, err
	case found == nil: // the whole read failed: a refusal
		recs.found = map[string]identity.Record{}
		for _, c := range clients {
			recs.notes[c] = "record not read: " + oneLine(err)
		}
	case err != nil: // some keys hold something else (ErrNotARecord)
		for _, c := range clients {
			if _, ok := found[c]; !ok {
				recs.notes[c] = "record not read: " + identity.Key(c) + " holds something else"
			}
		}
	}
	return recs, nil
}

// of returns the record of client as status shows it, or nil and the note
// that says why there is none.
func (r clientRecords) of(client string) (*holderRecord, string) {
	if rec, ok := r.found[client]; ok {
		return &holderRecord{Service: rec.Service, Host: rec.Host, PID: rec.PID, Version: rec.Version, Started: rec.Started}, ""
	}
	if note, ok := r.notes[client]; ok {
		return nil, note
	}
	return nil, noRecord
}

// readIdentities fills in who the holders and queued waiters of st are.
func readIdentities(ctx context.Context, rdb redis.UniversalClient, st *objectStatus) error {
	var clients []string
	for _, h := range st.Holders {
		clients = append(clients, h.ClientID)
	}
	for _, q := range st.Queue {
		clients = append(clients, q.ClientID)
	}
	if len(clients) == 0 {
		return nil
	}
	recs, err := readRecords(ctx, rdb, clients)
	if err != nil {
		return err
	}
	for i := range st.Holders {
		st.Holders[i].Holder, st.Holders[i].HolderNote = recs.of(st.Holders[i].ClientID)
	}
	for i := range st.Queue {
		st.Queue[i].Waiter, st.Queue[i].WaiterNote = recs.of(st.Queue[i].ClientID)
	}
	return nil
}

// who names the client of an owner field for people: its record,
// "orders-svc on host-3, pid 4121, since 12:03:11 (client 1a2b3c4d…, owner 7)",
// or without one its full client id, its owner id and why it has none: the
// note itself when full (one line that stands alone), else in two words (a
// line of a list that explains it once: recordsNote).
func who(clientID, ownerID string, rec *holderRecord, note string, full bool) string {
	if rec == nil {
		if note == "" {
			note = noRecord
		}
		if full {
			return fmt.Sprintf("client %s, owner %s; %s", clientID, ownerID, note)
		}
		short, _, _ := strings.Cut(note, ":")
		return fmt.Sprintf("client %s, owner %s (%s)", clientID, ownerID, short)
	}
	r := identity.Record{Client: clientID, Service: rec.Service, Host: rec.Host, PID: rec.PID, Version: rec.Version, Started: rec.Started}
	return fmt.Sprintf("%s (client %s, owner %s)", r.String(), shortID(clientID), ownerID)
}

// recordsNote explains, once under a list of holders and waiters, what the
// short notes of who say: the distinct notes of those without a record.
func recordsNote(st objectStatus) []string {
	var notes []string
	add := func(rec *holderRecord, note string) {
		if rec != nil {
			return
		}
		if note == "" {
			note = noRecord
		}
		if !slices.Contains(notes, note) {
			notes = append(notes, note)
		}
	}
	for _, h := range st.Holders {
		add(h.Holder, h.HolderNote)
	}
	for _, q := range st.Queue {
		add(q.Waiter, q.WaiterNote)
	}
	return notes
}

// shortID is the beginning of a client id, enough to tell clients apart by
// eye: "1a2b3c4d…".
func shortID(id string) string {
	const n = 8
	if len([]rune(id)) <= n {
		return id
	}
	return string([]rune(id)[:n]) + "…"
}

// describeFields names the holders whose owner fields are fields, for a
// message: "orders-svc on host-3, pid 4121, since 12:03:11 (client 1a2b3c4d…,
// owner 7), …", at most maxHoldersShown of them then "and N more". It reads
// their records; one it cannot read is named by its field's ids.
func describeFields(ctx context.Context, rdb redis.UniversalClient, fields []string) string {
	shown := fields[:min(len(fields), maxHoldersShown)]
	clients := make([]string, len(shown))
	for i, f := range shown {
		clients[i], _, _ = splitField(f)
	}
	recs, err := readRecords(ctx, rdb, slices.Clone(clients))
	if err != nil {
		recs = clientRecords{notes: map[string]string{}}
		for _, c := range clients {
			recs.notes[c] = "record not read: " + oneLine(err)
		}
	}
	names := make([]string, len(shown))
	for i, f := range shown {
		c, o, _ := splitField(f)
		rec, note := recs.of(c)
		names[i] = who(c, o, rec, note, true)
	}
	s := joinNames(names)
	if more := len(fields) - len(shown); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

// joinNames joins the names of holders with " | ": a name has commas of its
// own.
func joinNames(names []string) string { return strings.Join(names, " | ") }
