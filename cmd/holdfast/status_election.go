package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/redis/go-redis/v9"
)

// electionStatus is what status shows of an election (rlock.Election) at a
// lock's name: its leader record {N}:leader and channel holdfast_election:{N}.
type electionStatus struct {
	Leader          string `json:"leader,omitempty"`        // the leader's field in the lock's hash; "" without a leader
	Value           string `json:"value,omitempty"`         // what it proclaimed ("" for a leader without a record: Java)
	Term            int64  `json:"term"`                    // the leader's fencing token; without one, the latest term's
	SinceUnixMillis int64  `json:"since_unix_ms,omitempty"` // when the term began, on the server's clock
	StaleRecord     bool   `json:"stale_record,omitempty"`  // a record whose holder no longer holds the lock (never reported as leader)
	Candidates      int64  `json:"candidates"`              // clients waiting for the lock: subscribed to its channel
	Followers       int64  `json:"followers"`               // clients observing: subscribed to the election's channel
	Channel         string `json:"election_channel"`        // holdfast_election:{N}
	Record          string `json:"leader_record"`           // {N}:leader
	Proclaimed      bool   `json:"proclaimed"`              // the leader wrote the record (a holdfast campaign)
	LeaseLeftMillis int64  `json:"lease_left_ms,omitempty"` // the lock's PTTL while led
}

// readElection fills in st.Election when the name is an election's: its
// leader record exists, or followers observe it. It needs st's holders, token
// and lock subscribers, read before.
func readElection(ctx context.Context, rdb redis.UniversalClient, st *objectStatus) error {
	if st.Kind != kindFree && st.Kind != kindLock {
		return nil
	}
	record, channel := lua.LeaderRecordName(st.Name), lua.ElectionChannel(st.Name)
	rec, err := rdb.HGetAll(ctx, record).Result()
	if err != nil && !absent(err) {
		return err
	}
	n, err := numSub(ctx, rdb, st.Name, []string{channel})
	if err != nil {
		return err
	}
	if len(rec) == 0 && n[channel] == 0 {
		return nil
	}
	e := &electionStatus{Candidates: st.Subscribers, Followers: n[channel], Channel: channel, Record: record}
	if st.FencingToken != nil {
		e.Term = *st.FencingToken
	}
	switch {
	case len(st.Holders) > 0 && rec["holder"] == st.Holders[0].Field:
		e.Leader, e.Value, e.Proclaimed = rec["holder"], rec["value"], true
		e.Term, _ = strconv.ParseInt(rec["token"], 10, 64)
		e.SinceUnixMillis, _ = strconv.ParseInt(rec["since"], 10, 64)
	case len(st.Holders) > 0:
		e.Leader = st.Holders[0].Field
		e.StaleRecord = len(rec) > 0
	default:
		e.StaleRecord = len(rec) > 0
	}
	if e.Leader != "" {
		e.LeaseLeftMillis = st.TTLMillis
	}
	st.Election = e
	return nil
}

// writeElection writes the election's lines of st, if it is one.
func writeElection(w io.Writer, st objectStatus, now time.Time) {
	e := st.Election
	if e == nil {
		return
	}
	switch {
	case e.Leader == "":
		fmt.Fprintf(w, "  election: no leader (latest term %d)\n", e.Term)
	case e.Proclaimed:
		fmt.Fprintf(w, "  election: leader %q, term %d, since %s (%v ago)\n", e.Value, e.Term,
			time.UnixMilli(e.SinceUnixMillis).UTC().Format(time.RFC3339), now.Sub(time.UnixMilli(e.SinceUnixMillis)).Round(time.Second))
		fmt.Fprintf(w, "    leader: %s\n", leaderWho(st))
		fmt.Fprintf(w, "    leader field %s\n", e.Leader)
	default:
		fmt.Fprintf(w, "  election: led by %s without a leader record (a Java lock holder?), latest term %d\n", e.Leader, e.Term)
		fmt.Fprintf(w, "    leader: %s\n", leaderWho(st))
	}
	if e.StaleRecord {
		fmt.Fprintf(w, "    %s is stale: its holder no longer holds the lock\n", e.Record)
	}
	fmt.Fprintf(w, "    candidates: %d waiting (subscribed to the lock's channel); followers: %d observing %s\n",
		e.Candidates, e.Followers, e.Channel)
}

// leaderWho names the leader of the election st (its first holder) by its
// client's record (who).
func leaderWho(st objectStatus) string {
	h := st.Holders[0]
	return who(h.ClientID, h.OwnerID, h.Holder, h.HolderNote, false)
}
