-- release_partial: give back k of the owner's c holds; the owner keeps N.
--
-- KEYS[1]  lock key N
-- ARGV[1]  owner field
-- ARGV[2]  lease in ms re-applied to N
-- ARGV[3]  expected hold count c before this release
-- ARGV[4]  k, the number of holds given back (1 <= k < c)
--
-- Returns
--   0    released: the owner still holds N with count c-k
--   nil  not held by this owner (lock unchanged)
--   {n}  the owner's count in Redis is n > 0, neither c nor c-k: nothing changed
--
-- A second execution of the same request (go-redis retrying after a lost reply)
-- finds the count already at c-k and answers 0 again.
local c = tonumber(ARGV[3])
local k = tonumber(ARGV[4])
local n = redis.call('hget', KEYS[1], ARGV[1])
n = n and tonumber(n) or 0
if n == c then
  redis.call('hincrby', KEYS[1], ARGV[1], -k)
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
