-- elect_resign: after a leader released the election's lock, clear its record
-- and announce that there is no leader.
--
-- KEYS[1]  lock key N
-- KEYS[2]  leader record {N}:leader
-- KEYS[3]  election channel holdfast_election:{N}
-- ARGV[1]  the former leader's owner field
-- ARGV[2]  its term's fencing token, as a decimal
-- ARGV[3]  publish command: PUBLISH or SPUBLISH
--
-- Returns
--   1  the record was the term's: deleted, and "0" published on KEYS[3]
--   0  nothing changed: the record is another term's (a successor's, already
--      announced), or N is still held by ARGV[1] (the release did not run)
if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  return 0
end
if redis.call('hget', KEYS[2], 'token') ~= ARGV[2] or redis.call('hget', KEYS[2], 'holder') ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[2])
redis.call(ARGV[3], KEYS[3], '0')
return 1
