-- inspect: read a lock's state in one round trip.
--
-- KEYS[1]  lock key N
-- ARGV[1]  owner field, or "" when no owner is asked about
-- ARGV[2]  "" for a lock of one side; "read" or "write" for a side of a
--          read/write lock, which is locked as Redisson's isLocked says: the write
--          side when N is in write mode, the read side when N is in read mode or
--          has read holds besides the writer's
--
-- Returns {pttl, count}: pttl as PTTL (-2 not locked, -1 no expiry), count the hold
-- count of ARGV[1] (0 when absent). A value at N that is not a lock fails with
-- WRONGTYPE: HLEN raises it for a value that is not a hash, not_a_lock
-- (lock_shape.lua) for a hash of another shape.
local fields = redis.call('hlen', KEYS[1])
if fields > 0 then
  local bad = not_a_lock(KEYS[1])
  if bad then
    return bad
  end
end
local count = 0
if ARGV[1] ~= '' then
  count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or 0)
end
if ARGV[2] ~= '' then
  local mode = redis.call('hget', KEYS[1], 'mode')
  local locked = mode == ARGV[2] or (ARGV[2] == 'read' and mode == 'write' and fields > 2)
  if not locked then
    return {-2, count}
  end
end
return {redis.call('pttl', KEYS[1]), count}
