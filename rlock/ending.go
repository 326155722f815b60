package rlock

import "sync"

// ending is how a handle that ends once ends (a Lease, a MultiLease, a
// Permits): a channel closed at the end, made on demand since most callers
// never ask for it, the reason, and whom to tell. It is safe for
// concurrent use and has its own mutex, taken after any other lock of the
// package.
type ending struct {
	mu     sync.Mutex
	done   chan struct{}
	err    error
	notify []func(error)
	// watches are the functions given to watch that were not forgotten.
	watches map[*func(error)]struct{}
}

// Done returns the channel closed at the end.
func (e *ending) Done() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done == nil {
		e.done = make(chan struct{})
		if e.err != nil {
			close(e.done)
		}
	}
	return e.done
}

// Err returns nil until the end, then why.
func (e *ending) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// end ends e with err (not nil), once: the first reason stands, and end
// reports whether it was this one. It then calls the functions given to onEnd,
// without e's mutex held.
func (e *ending) end(err error) bool {
	e.mu.Lock()
	if e.err != nil {
		e.mu.Unlock()
		return false
	}
	e.err = err
	if e.done != nil {
		close(e.done)
	}
	notify := e.notify
	e.notify = nil
	watches := e.watches
	e.watches = nil
	e.mu.Unlock()
	for _, f := range notify {
		f(err)
	}
	for f := range watches {
		(*f)(err)
	}
	return true
}

// restate replaces the reason of an ended e: an Unlock that was not confirmed,
// and then was (Lease.Unlock called again).
func (e *ending) restate(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		e.err = err
	}
}

// settle gives e its final reason err: it ends e with err, or, when e ended
// already (as its release was sent), restates why.
func (e *ending) settle(err error) {
	if !e.end(err) {
		e.restate(err)
	}
}

// onEnd calls f with the reason when e ends, at once if it has.
func (e *ending) onEnd(f func(error)) {
	e.mu.Lock()
	if e.err == nil {
		e.notify = append(e.notify, f)
		e.mu.Unlock()
		return
	}
	err := e.err
	e.mu.Unlock()
	f(err)
}

// watch is onEnd for a function that may stop being wanted (a Context whose
// work is done): forget removes it. An end that began before forget may still
// call it.
func (e *ending) watch(f func(error)) (forget func()) {
	e.mu.Lock()
	if e.err != nil {
		err := e.err
		e.mu.Unlock()
		f(err)
		return func() {}
	}
	key := &f
	if e.watches == nil {
		e.watches = make(map[*func(error)]struct{})
	}
	e.watches[key] = struct{}{}
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		delete(e.watches, key)
		e.mu.Unlock()
	}
}

// watching returns how many functions watch e: for tests.
func (e *ending) watching() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.watches)
}
