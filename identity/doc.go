// Package identity says who holds a lock. Redisson's owner field is
// "<client UUID>:<owner>", which names no service, host or process; so every
// rlock.Client keeps one small Record about itself in Redis, at Key(its id):
// the service, the host, the pid, the library version and when the client
// started. The lock hashes stay Redisson's: the record is per client, not per
// lock, and nothing is written on a Lock or Unlock's path.
//
// A Keeper writes the record Delay (a second) after its client's first hold
// and every Refresh after that, with a time to live of Life, and deletes it
// when the client closes: a client that dies without closing leaves its
// record at most Life; a hold younger than Delay may show no record yet. A holder
// with no record is a client that is gone, or a client that does not write one
// (a Java process running Redisson, an older holdfast).
//
// Read looks records up for the client ids found in owner fields; holdfast
// status and the observers use it to name a holder as
// "orders-svc on host-3, pid 4121, since 12:03:11".
//
// The record costs the server, per live client, one string of about 200
// bytes and one SET every Refresh.
package identity
