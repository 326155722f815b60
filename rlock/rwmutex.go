package rlock

import "github.com/holdfast-go/holdfast/lua"

// RWMutex is a distributed reader/writer lock (Redisson's getReadWriteLock):
// any number of owners may hold its read side at once, or one owner its write
// side. Both sides are reentrant and each is a Locker, with the methods and
// options of Mutex.
//
// In Redis it is one hash at the lock's name, as Redisson's: a field "mode"
// ("read" or "write"), the read owners' fields and the write owner's field
// "<client id>:<owner id>:write", each with its hold count, and for every read
// hold a key "{name}:<owner field>:rwlock_timeout:<k>" carrying its lease, which
// the watchdog renews with the hash. Releases are announced on
// "redisson_rwlock:{name}": "0" when the last reader leaves, "1" (wake every
// waiter) when the writer does. A Java process using getReadWriteLock(name)
// shares the lock.
//
// The owner that holds the write side may take the read side too, and keep it
// after unlocking the write side (a downgrade). The reverse, an upgrade, is
// refused at once with ErrUpgrade. Neither side is fair: a steady stream of
// readers can keep a writer waiting as long as it lasts (see docs/design.md);
// use a FairMutex where arrival order matters.
type RWMutex struct {
	name  string
	read  ReadMutex
	write WriteMutex
}

// ReadMutex is the read side of an RWMutex (Redisson's readLock()).
type ReadMutex struct{ Mutex }

// WriteMutex is the write side of an RWMutex (Redisson's writeLock()).
type WriteMutex struct{ Mutex }

// NewRWMutex returns a handle on the read/write lock called name.
func (c *Client) NewRWMutex(name string) *RWMutex {
	return &RWMutex{
		name:  name,
		read:  ReadMutex{newLayoutMutex(c, name, lua.LayoutRead, kind{})},
		write: WriteMutex{newLayoutMutex(c, name, lua.LayoutWrite, kind{})},
	}
}

// Name returns the lock's name.
func (rw *RWMutex) Name() string { return rw.name }

// ReadLock returns the read side (Redisson's readLock()).
func (rw *RWMutex) ReadLock() *ReadMutex { return &rw.read }

// WriteLock returns the write side (Redisson's writeLock()).
func (rw *RWMutex) WriteLock() *WriteMutex { return &rw.write }
