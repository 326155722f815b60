-- read_acquire: take the read side of a read/write lock for an owner, or re-enter
-- it (Redisson's RedissonReadLock); idempotent under client retries.
--
-- KEYS[1]  lock key N (hash: "mode" -> "read" or "write", owner fields -> counts)
-- ARGV[1]  lease in ms
-- ARGV[2]  owner field L "<client uuid>:<owner id>"
-- ARGV[3]  the same owner's write field "L:write"
-- ARGV[4]  expected hold count c: the owner's read count on N as the client knows it
-- ARGV[5]  read timeout prefix P ("{N}"): the k-th read hold of L is kept alive by
--          the key "P:L:rwlock_timeout:k" (Redisson's layout)
--
-- Returns "OK" (acquired: L's count is now c+1, also after a retried execution,
-- which sets the lease again),
-- an integer (not acquired: N's PTTL, -1 when it has no expiry) or {n} (L's
-- count in Redis is n, not c: nothing changed). As Redisson: a read hold is
-- granted when N is free, in read mode, or in write mode held by L's own write
-- field (a downgrade). A hash without "mode" (another kind of lock) counts as
-- held. N's TTL becomes the longest of its TTL and the lease.
local c = tonumber(ARGV[4])
local n = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or 0)
local timeout = ARGV[5] .. ':' .. ARGV[2] .. ':rwlock_timeout:'
if n == c + 1 then
  -- a second execution: the lease again, from now, as the first one set it,
  -- so that the caller's deadline (this call's send time plus the lease) is
  -- never after the hold's in Redis
  redis.call('set', timeout .. n, 1, 'px', ARGV[1])
  redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
  return redis.status_reply('OK')
end
if n ~= c then
  return {n}
end
local mode = redis.call('hget', KEYS[1], 'mode')
if not mode then
  if redis.call('exists', KEYS[1]) == 1 then
    local bad = not_a_lock(KEYS[1])
    if bad then
      return bad
    end
    return redis.call('pttl', KEYS[1])
  end
  redis.call('hset', KEYS[1], 'mode', 'read', ARGV[2], 1)
  redis.call('set', timeout .. '1', 1, 'px', ARGV[1])
  redis.call('pexpire', KEYS[1], ARGV[1])
  return redis.status_reply('OK')
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
  local k = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('set', timeout .. k, 1, 'px', ARGV[1])
  local remain = redis.call('pttl', KEYS[1])
  redis.call('pexpire', KEYS[1], math.max(remain, tonumber(ARGV[1])))
  return redis.status_reply('OK')
end
local bad = not_a_lock(KEYS[1])
if bad then
  return bad
end
return redis.call('pttl', KEYS[1])
