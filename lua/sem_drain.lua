-- sem_drain: take every available permit of a semaphore (RSemaphore
-- drainPermits, §2.11): SET N 0, nothing published.
--
-- KEYS[1]  semaphore N
-- KEYS[2]  request key
-- ARGV[1]  request key time to live in ms
--
-- Returns N's value before (0 when absent; a negative value is raised to 0 and
-- returned).
return counted(KEYS[2], KEYS[1], function(v)
  if v == nil then
    return 0
  end
  redis.call('set', KEYS[1], 0)
  return record(KEYS[2], ARGV[1], v)
end)
