-- permit_acquire: take permits with ids from a permit-expirable semaphore
-- (RPermitExpirableSemaphore tryAcquire, §2.12).
--
-- KEYS[1]  semaphore N (string: available permits)
-- KEYS[2]  permits Z = {N}:timeout (zset: id -> expiry in epoch ms)
-- KEYS[3]  channel redisson_sc:{N}
-- ARGV[1]  now: the caller's clock, epoch ms
-- ARGV[2]  publish command
-- ARGV[3..] the waiters of one client to serve, the caller's first, each as
--          its count of ids >= 1, their expiry (now + lease, or
--          922337203685477: no lease), then the ids, 16 raw bytes each
--
-- 1. A second execution of the first waiter's request (go-redis resending a script whose
--    reply was lost; the caller attempting again after a reply that came
--    past the lease, when its give-back did not reach Redis) finds its first
--    id in Z. It is granted again only while live: its expiry after both the
--    caller's clock and the server's (TIME). Then it answers '=' .. the
--    expiry Z holds, from which the caller counts the handle's deadline.
-- 2. Reclaim at most the first waiter's count of expired permits (publishing
--    the new available count when positive), as Redisson does.
-- 3. If N holds at least that count: serve the waiters in order while N
--    covers the next (ZADD their ids with their expiry), DECRBY the number of
--    ids that were not in Z (an expired id of an earlier execution that no
--    reclaim took is still counted as acquired: it is taken afresh, not
--    twice), give Z N's time to live if N has one, and return the number of
--    waiters served.
-- 4. Else return ':' .. the earliest expiry of a permit with a lease: when the
--    caller may attempt again without a message; 'absent' when there is none
--    and N does not exist; nil otherwise.
local held = redis.call('zscore', KEYS[2], ARGV[5])
if held then
  local t = redis.call('time')
  local now = math.max(tonumber(ARGV[3]), tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  if tonumber(held) > now then
    return '=' .. held
  end
end
return counted(nil, KEYS[1], function(v)
  local count = tonumber(ARGV[3])
  v = reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[1], count, ARGV[2]) or v
  if v ~= nil and v >= count then
    local served, taken = serve(KEYS[2], v, 3)
    redis.call('decrby', KEYS[1], taken)
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then
      redis.call('pexpire', KEYS[2], ttl)
    end
    return served
  end
  local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
  if first[1] ~= nil and first[2] ~= '922337203685477' then
    return ':' .. first[2]
  end
  if v == nil then
    return 'absent'
  end
  return nil
end)
