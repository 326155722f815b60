-- write_release: give back k of an owner's c write holds on a read/write lock.
--
-- KEYS[1]  lock key N
-- KEYS[2]  channel redisson_rwlock:{N}
-- KEYS[3]  unlock latch redisson_unlock_latch:{N}:<request id>
-- ARGV[1]  the owner's write field W
-- ARGV[2]  expected write count c before this release
-- ARGV[3]  k, the holds given back (1 <= k <= c)
-- ARGV[4]  lease in ms re-applied to N on a partial release
-- ARGV[5]  latch time to live in ms
-- ARGV[6]  publish command: PUBLISH or SPUBLISH
--
-- Returns
--   0    partial: W still holds c-k (also for a retried execution)
--   1    released: W's field deleted; N deleted when nothing else holds it, else
--        (the owner's own read holds, after a downgrade) N turns to read mode;
--        either way "1" is published on KEYS[2], which wakes every waiter
--   nil  W held nothing (lock unchanged)
--   {n}  W's count in Redis is n, neither c nor c-k: nothing changed
--
-- Redisson publishes nothing when N turns to read mode; publishing lets waiting
-- readers in at once instead of after N's TTL.
local c = tonumber(ARGV[2])
local k = tonumber(ARGV[3])
local n = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or 0)
if n == 0 then
  local latch = redis.call('get', KEYS[3])
  if latch then
    return tonumber(latch)
  end
  return nil
end
if n ~= c then
  if n == c - k then
    return 0
  end
  return {n}
end
if n > k then
  redis.call('hincrby', KEYS[1], ARGV[1], -k)
  redis.call('pexpire', KEYS[1], ARGV[4])
  return 0
end
redis.call('hdel', KEYS[1], ARGV[1])
if redis.call('hlen', KEYS[1]) <= 1 then
  redis.call('del', KEYS[1])
else
  redis.call('hset', KEYS[1], 'mode', 'read')
end
redis.call(ARGV[6], KEYS[2], '1')
redis.call('set', KEYS[3], '1', 'px', ARGV[5])
return 1
