-- sem_set: set the permits of a semaphore that does not exist yet (RSemaphore
-- and RPermitExpirableSemaphore trySetPermits, §2.11, §2.12).
--
-- KEYS[1]  semaphore N
-- KEYS[2]  channel redisson_sc:{N}
-- KEYS[3]  request key
-- ARGV[1]  n >= 0
-- ARGV[2]  publish command
-- ARGV[3]  request key time to live in ms
-- ARGV[4]  N's time to live in ms; '0': none
--
-- Returns 1 after SET N n (PX ARGV[4]) and publishing n, 0 when N exists.
return counted(KEYS[3], KEYS[1], function(v)
  if v ~= nil then
    return 0
  end
  if ARGV[4] ~= '0' then
    redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[4])
  else
    redis.call('set', KEYS[1], ARGV[1])
  end
  redis.call(ARGV[2], KEYS[2], ARGV[1])
  return record(KEYS[3], ARGV[3], 1)
end)
