-- permit_count: read a permit-expirable semaphore's counts after reclaiming
-- every expired permit (RPermitExpirableSemaphore availablePermits,
-- acquiredPermits, getPermits, §2.12).
--
-- KEYS[1]  semaphore N
-- KEYS[2]  permits Z = {N}:timeout
-- KEYS[3]  channel redisson_sc:{N}
-- ARGV[1]  now: the caller's clock, epoch ms
-- ARGV[2]  publish command
-- ARGV[3]  'available', 'acquired' or 'total'
--
-- Returns N's value (0 when absent), Z's size, or their sum (0 when N is
-- absent, whatever Z holds, as Redisson does).
return counted(nil, KEYS[1], function(v)
  v = reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[1], nil, ARGV[2]) or v
  if ARGV[3] == 'available' then
    return v or 0
  end
  local acquired = redis.call('zcard', KEYS[2])
  if ARGV[3] == 'acquired' then
    return acquired
  end
  if v == nil then
    return 0
  end
  return v + acquired
end)
