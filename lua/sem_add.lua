-- sem_add: add d (any sign) to a semaphore's available permits (addPermits,
-- §2.11, §2.12). SET rewrites N, dropping any time to live, as Redisson does.
--
-- KEYS[1]  semaphore N
-- KEYS[2]  channel redisson_sc:{N}
-- KEYS[3]  request key
-- ARGV[1]  d
-- ARGV[2]  publish command
-- ARGV[3]  request key time to live in ms
-- ARGV[4]  'total': publish the new value, whatever its sign (RSemaphore);
--          'delta': publish d only when d > 0 (RPermitExpirableSemaphore)
--
-- Returns 1.
return counted(KEYS[3], KEYS[1], function(v)
  local d = tonumber(ARGV[1])
  local nv = (v or 0) + d
  redis.call('set', KEYS[1], nv)
  if ARGV[4] == 'total' then
    redis.call(ARGV[2], KEYS[2], nv)
  elseif d > 0 then
    redis.call(ARGV[2], KEYS[2], d)
  end
  return record(KEYS[3], ARGV[3], 1)
end)
