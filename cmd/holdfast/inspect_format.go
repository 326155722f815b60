package main

import (
	"fmt"
	"io"
	"time"
)

// writeHuman writes st as a short block: a headline, then one line per fact.
func writeHuman(w io.Writer, st objectStatus) {
	fmt.Fprintf(w, "%s: %s\n", st.Name, headline(st))
	switch st.Kind {
	case kindNotALock:
		return
	case kindCounter, kindPermits, kindSema, kindLatch:
		writeCounter(w, st)
		return
	}
	if st.TTLMillis != -2 {
		fmt.Fprintf(w, "  lease:    %s\n", fmtMillis(st.TTLMillis))
	}
	if len(st.Holders) > 0 {
		fmt.Fprintf(w, "  holders:  %d\n", len(st.Holders))
		for _, h := range st.Holders {
			fmt.Fprintf(w, "    %s\n", holderLine(h))
		}
	}
	if len(st.Queue) > 0 {
		fmt.Fprintf(w, "  queue:    %d waiting, first served first\n", len(st.Queue))
		for i, q := range st.Queue {
			fmt.Fprintf(w, "    %d. %s\n", i+1, queuedLine(q))
		}
	}
	for _, note := range recordsNote(st) {
		fmt.Fprintf(w, "  %s\n", note)
	}
	if st.Kind == kindFair {
		fmt.Fprintf(w, "  waiters:  %d queued; %d subscribed to %s\n", len(st.Queue), st.Subscribers, st.Channel)
	} else {
		fmt.Fprintf(w, "  waiters:  %d subscribed to %s\n", st.Subscribers, st.Channel)
	}
	if st.FencingToken != nil {
		fmt.Fprintf(w, "  fencing token: %d (the latest handed out)\n", *st.FencingToken)
	}
	writeElection(w, st, time.Now())
}

// headline says in a few words what st is.
func headline(st objectStatus) string {
	switch st.Kind {
	case kindFree:
		return "free (no key)"
	case kindLock:
		return "locked (RLock layout: reentrant, fenced, non-reentrant or spin lock)"
	case kindFair:
		if len(st.Holders) == 0 {
			return "fair lock, free (waiters queued)"
		}
		return "fair lock, locked"
	case kindRW:
		return "read/write lock, held in " + st.Mode + " mode"
	case kindCounter:
		switch st.SeenAs {
		case kindSema:
			return "semaphore or latch: value " + st.Value + ", waited on as a semaphore"
		case kindLatch:
			return "semaphore or latch: value " + st.Value + ", awaited as a countdown latch"
		}
		return "semaphore or latch: value " + st.Value
	case kindPermits:
		return fmt.Sprintf("permit-expirable semaphore: %s available, %d acquired", st.Value, st.AcquiredPermits)
	case kindSema:
		if st.RedisType == "none" {
			return "semaphore: no key (0 available: never initialised, or deleted)"
		}
		return "semaphore: " + st.Value + " available"
	case kindLatch:
		if st.RedisType == "none" {
			return "countdown latch: open (no key: counted down, or never set)"
		}
		return "countdown latch: count " + st.Value
	}
	return notA(wantOf(st.as), st.RedisType)
}

// kindLabel names the kind of lock st in a few words.
func kindLabel(st objectStatus) string {
	switch st.Kind {
	case kindFair:
		return "fair lock"
	case kindRW:
		return "read/write lock in " + st.Mode + " mode"
	}
	return "lock"
}

// holderLine describes one holder: who it is (its client's record) and its
// hold count.
func holderLine(h holder) string {
	s := fmt.Sprintf("held by %s  count %d", who(h.ClientID, h.OwnerID, h.Holder, h.HolderNote, false), h.Count)
	if h.Side != "" {
		s = fmt.Sprintf("%-5s  %s", h.Side, s)
	}
	if rt := h.ReadTimeouts; rt != nil {
		s += fmt.Sprintf("  timeout keys %d", rt.Keys)
		if rt.Keys > 0 {
			s += ", shortest " + fmtMillis(rt.MinTTLMillis)
		}
	}
	return s
}

// queuedLine describes one waiter of a fair lock's queue.
func queuedLine(q queued) string {
	s := who(q.ClientID, q.OwnerID, q.Waiter, q.WaiterNote, false)
	switch d := q.DeadlineInMillis; {
	case d == nil:
		s += "  no deadline"
	case *d >= 0:
		s += "  deadline in " + (time.Duration(*d) * time.Millisecond).String()
	default:
		s += "  deadline passed " + (time.Duration(-*d) * time.Millisecond).String() + " ago"
	}
	return s + fmt.Sprintf("  subscribed %d", q.Subscribers)
}

// writeCounter writes the lines of a semaphore or countdown latch.
func writeCounter(w io.Writer, st objectStatus) {
	if st.TTLMillis >= 0 {
		fmt.Fprintf(w, "  expiry:   %s\n", fmtMillis(st.TTLMillis))
	}
	if st.Kind == kindPermits {
		writePermits(w, st)
	}
	if st.Kind == kindCounter {
		fmt.Fprintf(w, "  reading:  %s\n", counterReading(st))
	}
	if st.Kind == kindLatch {
		fmt.Fprintf(w, "  awaiters: %d subscribed to %s\n", st.Subscribers, st.Channel)
		return
	}
	fmt.Fprintf(w, "  waiters:  %d subscribed to %s", st.Subscribers, st.Channel)
	if st.LatchChannel != "" {
		fmt.Fprintf(w, ", %d to %s", st.LatchSubscribers, st.LatchChannel)
	}
	fmt.Fprintln(w)
}

// writePermits writes the acquired permits of a permit-expirable semaphore,
// one line each, earliest expiry first.
func writePermits(w io.Writer, st objectStatus) {
	fmt.Fprintf(w, "  permits:  %d acquired, earliest expiry first\n", st.AcquiredPermits)
	for _, p := range st.Permits {
		fmt.Fprintf(w, "    %s  %s\n", p.ID, permitLease(p))
	}
	if more := st.AcquiredPermits - int64(len(st.Permits)); more > 0 {
		fmt.Fprintf(w, "    and %d more\n", more)
	}
}

// permitLease says how long permit p has left.
func permitLease(p permit) string {
	switch d := p.ExpiresInMillis; {
	case d == nil:
		return "no lease"
	case *d >= 0:
		return "lease " + (time.Duration(*d) * time.Millisecond).String() + " left"
	}
	return "lease ran out " + (time.Duration(-*p.ExpiresInMillis) * time.Millisecond).String() +
		" ago (the permit returns at the semaphore's next reclaiming call)"
}

// counterReading says what is known of a semaphore_or_latch st: what its
// channels' subscribers show it is, or that nothing in Redis tells.
func counterReading(st objectStatus) string {
	switch st.SeenAs {
	case kindSema:
		return fmt.Sprintf("a semaphore with %s permits available: %d client(s) wait for permits, none awaits a latch", st.Value, st.Subscribers)
	case kindLatch:
		return fmt.Sprintf("a countdown latch at count %s: %d client(s) await it, none waits for permits", st.Value, st.LatchSubscribers)
	}
	return fmt.Sprintf("a semaphore with %s permits free and none acquired, or a countdown latch at count %s: "+
		"Redis keeps nothing else that tells them apart (name it with --semaphore or --latch)", st.Value, st.Value)
}
