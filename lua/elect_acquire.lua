-- elect_acquire: campaign in an election: take its lock (acquire.lua, on a
-- fenced lock), and when that took a new term, record the leader and announce
-- it, in the same step. Built as lock_shape.lua, then acquire.lua wrapped in
-- the function acquire(), then this file.
--
-- KEYS[1]  lock key N (RLock's hash: owner field -> hold count)
-- KEYS[2]  token counter redisson_lock_token:{N} (RFencedLock's)
-- KEYS[3]  leader record {N}:leader (hash: holder, token, value, since)
-- KEYS[4]  election channel holdfast_election:{N}
-- ARGV[1]  lease in ms (acquire.lua)
-- ARGV[2]  owner field "<client uuid>:<owner id>" (acquire.lua)
-- ARGV[3]  expected hold count (acquire.lua; 0 for a campaign)
-- ARGV[4]  the value the candidate proclaims
-- ARGV[5]  publish command: PUBLISH or SPUBLISH
--
-- Returns what acquire.lua returns. When it acquired ({"OK", t}) and the
-- record is not already the term t's (a retried execution of this same call
-- finds it written), the record becomes {holder = ARGV[2], token = t, value =
-- ARGV[4], since = the server's clock in ms}, and t is published on KEYS[4].
-- Numbers are written with string.format: Lua's own conversion would round
-- a token above 10^14.
local r = acquire()
if type(r) == 'table' and r[1] == 'OK' then
  local token = string.format('%d', r[2])
  if redis.call('hget', KEYS[3], 'token') ~= token then
    local now = redis.call('time')
    local since = string.format('%d', tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000))
    redis.call('hset', KEYS[3], 'holder', ARGV[2], 'token', token, 'value', ARGV[4], 'since', since)
    redis.call(ARGV[5], KEYS[4], token)
  end
end
return r
