-- inspect: read a lock's state in one round trip.
--
-- KEYS[1]  lock key N
-- ARGV[1]  owner field, or "" when no owner is asked about
--
-- Returns {pttl, count}: pttl as PTTL (-2 not locked, -1 no expiry), count the hold
-- count of ARGV[1] (0 when absent). A value at N that is not a hash fails with
-- WRONGTYPE (HLEN raises it).
redis.call('hlen', KEYS[1])
local count = 0
if ARGV[1] ~= '' then
  count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or 0)
end
return {redis.call('pttl', KEYS[1]), count}
