package chaos

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// followers starts, when the workers campaign in elections, one follower
// goroutine per election name (on wg): it records every view Observe
// delivers until the scenario's end.
func (w *worker) followers(wg *sync.WaitGroup) {
	if !slices.Contains(w.cfg.Kinds, KindElection) || w.cfg.NoFollowers {
		return
	}
	for i := range w.cfg.Names {
		name := objectName(w.cfg.Prefix, KindElection, i)
		g := w.cfg.Goroutines + i
		wg.Go(func() { w.follow(g, name) })
	}
}

// follow records the views of the election name until Until.
func (w *worker) follow(g int, name string) {
	ctx, cancel := context.WithDeadline(context.Background(), monoTime(w.cfg.Until))
	defer cancel()
	since := Mono()
	for v := range w.c.NewElection(name).Observe(ctx) {
		now := Mono()
		w.rec.Record(Op{G: g, Kind: KindElection, Name: name, Op: OpView, Call: since, Ret: now, OK: v.Elected(), Token: v.Token})
		since = now
	}
}

// checkElections checks the elections' own promises (their terms strictly
// increasing is checkTokens'): each follower's views in term order and
// linearizable:
// a view read in [Call, Ret] shows a term no older than every term acquired
// before Call, a leader whose campaign had begun by Ret, and not one whose
// resignation was confirmed before Call.
func checkElections(r *Report, ops []Op, holds map[holdKey]*holdRec) {
	terms := byName(holds, KindElection)
	last := map[holdKey]int64{} // by follower (proc, goroutine as hold)
	for _, v := range ops {
		if v.Op != OpView {
			continue
		}
		r.Views++
		k := holdKey{v.Proc, int64(v.G)}
		if prev, ok := last[k]; ok && v.Token < prev {
			r.Violations++
			r.Details = append(r.Details, fmt.Sprintf("violation: p%d follower of %s: view of term %d after term %d", v.Proc, v.Name, v.Token, prev))
		}
		last[k] = v.Token
		if why := staleView(v, terms[v.Name]); why != "" {
			r.Violations++
			r.Details = append(r.Details, fmt.Sprintf("violation: p%d follower of %s: view of term %d (leader %v) %s", v.Proc, v.Name, v.Token, v.OK, why))
		}
	}
}

// staleView says why the view v cannot have been read in [v.Call, v.Ret],
// given the terms of its election, or "".
func staleView(v Op, terms []*holdRec) string {
	for _, h := range terms {
		t := h.acq.Token
		switch {
		case t > v.Token && h.acq.Ret < v.Call:
			return fmt.Sprintf("read after term %d was acquired (%v before the read began)", t, time.Duration(v.Call-h.acq.Ret))
		case t == v.Token && v.OK && h.acq.Call > v.Ret:
			return "delivered before its campaign began"
		case t == v.Token && v.OK && h.endOp != nil && h.endOp.OK && h.endOp.Ret < v.Call:
			return "read after that term's resignation was confirmed"
		}
	}
	return ""
}
