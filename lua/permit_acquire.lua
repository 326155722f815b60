-- permit_acquire: take permits with ids from a permit-expirable semaphore
-- (RPermitExpirableSemaphore tryAcquire, §2.12).
--
-- KEYS[1]  semaphore N (string: available permits)
-- KEYS[2]  permits Z = {N}:timeout (zset: id -> expiry in epoch ms)
-- KEYS[3]  channel redisson_sc:{N}
-- ARGV[1]  count of ids >= 1
-- ARGV[2]  their expiry: now + lease, or 922337203685477 (no lease)
-- ARGV[3]  now: the caller's clock, epoch ms
-- ARGV[4]  publish command
-- ARGV[5..] the ids, 16 raw bytes each
--
-- 1. Reclaim at most count expired permits (publishing the new available count
--    when positive), as Redisson does.
-- 2. If N holds at least count: DECRBY count, ZADD every id with ARGV[2], give
--    Z N's time to live if N has one, and return 'OK'.
-- 3. Else return ':' .. the earliest expiry of a permit with a lease, or nil
--    when none has one: when the caller may attempt again without a message.
-- A second execution (go-redis retrying after a lost reply) finds the first id
-- in Z and answers 'OK' without taking more: the ids identify the request.
if redis.call('zscore', KEYS[2], ARGV[5]) then
  return 'OK'
end
return counted(nil, KEYS[1], function()
  local count = tonumber(ARGV[1])
  reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[3], count, ARGV[4])
  local v = counter(KEYS[1])
  if v ~= nil and v >= count then
    redis.call('decrby', KEYS[1], count)
    for i = 5, #ARGV do
      redis.call('zadd', KEYS[2], ARGV[2], ARGV[i])
    end
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then
      redis.call('pexpire', KEYS[2], ttl)
    end
    return 'OK'
  end
  local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
  if first[1] ~= nil and first[2] ~= '922337203685477' then
    return ':' .. first[2]
  end
  return nil
end)
