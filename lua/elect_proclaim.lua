-- elect_proclaim: the leader changes the value it proclaims, keeping its term.
--
-- KEYS[1]  lock key N
-- KEYS[2]  leader record {N}:leader
-- KEYS[3]  election channel holdfast_election:{N}
-- ARGV[1]  the leader's owner field
-- ARGV[2]  its term's fencing token, as a decimal
-- ARGV[3]  the new value
-- ARGV[4]  publish command: PUBLISH or SPUBLISH
--
-- Returns
--   1  the record holds the new value (written whole, with since = the
--      server's clock, if it was not the term's: deleted from outside), and
--      the token was published on KEYS[3]
--   0  N is not held by ARGV[1]: the leadership was lost; nothing changed
--
-- A value at N or KEYS[2] that is not a hash fails with WRONGTYPE.
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return 0
end
if redis.call('hget', KEYS[2], 'token') == ARGV[2] and redis.call('hget', KEYS[2], 'holder') == ARGV[1] then
  redis.call('hset', KEYS[2], 'value', ARGV[3])
else
  local now = redis.call('time')
  local since = string.format('%d', tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000))
  redis.call('hset', KEYS[2], 'holder', ARGV[1], 'token', ARGV[2], 'value', ARGV[3], 'since', since)
end
redis.call(ARGV[4], KEYS[3], ARGV[2])
return 1
