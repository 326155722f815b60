-- sem_release: give n permits to a semaphore (RSemaphore release and
-- releaseIfExists, §2.11; the permit-expirable semaphore never uses it).
--
-- KEYS[1]  semaphore N
-- KEYS[2]  channel redisson_sc:{N}
-- KEYS[3]  request key
-- ARGV[1]  n >= 1
-- ARGV[2]  publish command
-- ARGV[3]  request key time to live in ms
-- ARGV[4]  '1': only if N exists (releaseIfExists); '0': create N if absent
--
-- Returns 1 after INCRBY n and publishing the new value on KEYS[2], 0 when
-- ARGV[4] is '1' and N is absent (nothing changes).
return counted(KEYS[3], KEYS[1], function(v)
  if v == nil and ARGV[4] == '1' then
    return 0
  end
  redis.call(ARGV[2], KEYS[2], redis.call('incrby', KEYS[1], ARGV[1]))
  return record(KEYS[3], ARGV[3], 1)
end)
