-- release: give back k holds; at zero delete N and publish, or hand N to a successor.
--
-- KEYS[1]  lock key N
-- KEYS[2]  channel redisson_lock__channel:{N}
-- KEYS[3]  unlock latch redisson_unlock_latch:{N}:<request id>
-- ARGV[1]  unlock message: "0"
-- ARGV[2]  lease in ms re-applied to N on a partial release
-- ARGV[3]  owner field
-- ARGV[4]  publish command: PUBLISH or SPUBLISH
-- ARGV[5]  latch time to live in ms
-- ARGV[6]  expected hold count c (>= 1) before this release
-- ARGV[7]  successor owner field, or "" for none
-- ARGV[8]  successor lease in ms
-- ARGV[9]  k, the number of holds given back (1 <= k <= c); k == c gives back
--          every hold of the owner, whatever Redis counts
-- ARGV[10] "1": hand off only if no other client listens on KEYS[2] (the
--          releasing client has handed off often enough in a row); "0": hand off
--          whenever a successor is given
--
-- Returns
--   0    partial release: the owner still holds N with count c-k
--   1    released: the owner's field deleted (with it N) and "0" published on KEYS[2]
--   2    handed off: N now belongs to the successor with count 1, nothing published
--   nil  not held by this owner (lock unchanged)
--   {n}  partial release only: the owner's count in Redis is n > 0, not c;
--        nothing changed
--
-- A second execution of the same request (go-redis retrying after a lost reply)
-- answers as the first did: a partial release finds the count already at c-k; the
-- final release, after which the field is gone, leaves the latch (Redisson's unlock
-- latch, issue #4871) so that its retry is not mistaken for "not held".
local c = tonumber(ARGV[6])
local k = tonumber(ARGV[9])
if k < c then
  local n = redis.call('hget', KEYS[1], ARGV[3])
  n = n and tonumber(n) or 0
  if n == c then
    redis.call('hincrby', KEYS[1], ARGV[3], -k)
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
  end
  if n > 0 and n == c - k then
    return 0
  end
  if n == 0 then
    return nil
  end
  return {n}
end
if redis.call('hdel', KEYS[1], ARGV[3]) == 0 then
  local latch = redis.call('get', KEYS[3])
  if latch then
    return tonumber(latch)
  end
  return nil
end
if ARGV[7] ~= '' and redis.call('exists', KEYS[1]) == 0
    and (ARGV[10] ~= '1' or redis.call('pubsub', 'numsub', KEYS[2])[2] <= 1) then
  redis.call('hset', KEYS[1], ARGV[7], 1)
  redis.call('pexpire', KEYS[1], ARGV[8])
  redis.call('set', KEYS[3], '2', 'px', ARGV[5])
  return 2
end
redis.call(ARGV[4], KEYS[2], ARGV[1])
redis.call('set', KEYS[3], '1', 'px', ARGV[5])
return 1
