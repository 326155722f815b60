-- force_release: delete the lock whoever holds it, and publish when something was deleted.
--
-- KEYS[1]  lock key N
-- KEYS[2]  channel: redisson_lock__channel:{N}, or redisson_rwlock:{N}
-- ARGV[1]  message: "0", or "1" for the write side of a read/write lock
-- ARGV[2]  publish command: PUBLISH or SPUBLISH
-- ARGV[3]  "" to delete N in any case; "read" or "write" to delete it only when
--          its "mode" field says so (the sides of a read/write lock, as Redisson)
--
-- Returns 1 when N was deleted, 0 when it did not exist or was in the other mode.
-- A value at N that is not a lock is left alone and fails with WRONGTYPE: HLEN
-- raises it for a value that is not a hash, not_a_lock (lock_shape.lua) for a
-- hash of another shape.
if redis.call('hlen', KEYS[1]) == 0 then
  return 0
end
local bad = not_a_lock(KEYS[1])
if bad then
  return bad
end
if ARGV[3] ~= '' and redis.call('hget', KEYS[1], 'mode') ~= ARGV[3] then
  return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1
