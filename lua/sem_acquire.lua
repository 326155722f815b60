-- sem_acquire: take n permits of a semaphore (RSemaphore tryAcquire, §2.11).
--
-- KEYS[1]  semaphore N (string: available permits)
-- KEYS[2]  request key
-- ARGV[1]  n >= 1
-- ARGV[2]  request key time to live in ms
--
-- Returns 1 when N held at least n and was decremented by n; 0 when N holds
-- fewer, -1 when N does not exist (nothing changes, nothing is published).
return counted(KEYS[2], KEYS[1], function(v)
  if v == nil then
    return -1
  end
  if v < tonumber(ARGV[1]) then
    return 0
  end
  redis.call('decrby', KEYS[1], ARGV[1])
  return record(KEYS[2], ARGV[2], 1)
end)
