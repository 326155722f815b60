-- elect_leader: read an election's leader: the lock's holder, and the record
-- when it is the holder's. Read-only.
--
-- KEYS[1]  lock key N
-- KEYS[2]  leader record {N}:leader
-- KEYS[3]  token counter redisson_lock_token:{N}
--
-- Returns
--   {"", token, "", "0", -2, 0}
--        N does not exist: no leader; token is the counter KEYS[3] ("0"
--        when absent), the latest term's. A record left behind is stale
--        and never read.
--   {holder, token, value, since, pttl, proclaimed}
--        holder: N's owner field; pttl: N's PTTL in ms (-1: no expiry).
--        proclaimed 1: the record is the holder's, and token, value and
--        since (epoch ms on the server's clock) are its own. proclaimed 0: the
--        holder wrote no record (a Java process holding the RLock or
--        RFencedLock): token is the counter KEYS[3] ("0" when absent), value
--        "" and since "0".
--
-- A hash at N that is not a lock (lock_shape.lua), or a value of another
-- type at N or KEYS[2], fails with WRONGTYPE.
local bad = not_a_lock(KEYS[1])
if bad then
  return bad
end
if redis.call('hexists', KEYS[1], 'mode') == 1 then
  return redis.error_reply('WRONGTYPE the hash at ' .. KEYS[1] .. ' is a read/write lock, not an election')
end
local fields = redis.call('hkeys', KEYS[1])
if #fields == 0 then
  return {'', redis.call('get', KEYS[3]) or '0', '', '0', -2, 0}
end
local holder = fields[1]
local ttl = redis.call('pttl', KEYS[1])
local r = redis.call('hmget', KEYS[2], 'holder', 'token', 'value', 'since')
if r[1] == holder and r[2] and r[3] and r[4] then
  return {holder, r[2], r[3], r[4], ttl, 1}
end
return {holder, redis.call('get', KEYS[3]) or '0', '', '0', ttl, 0}
