-- sem_acquire: take permits of a semaphore (RSemaphore tryAcquire, §2.11) for
-- one or more waiters of one client, in their order.
--
-- KEYS[1]  semaphore N (string: available permits)
-- KEYS[2]  request key
-- ARGV[1]  request key time to live in ms
-- ARGV[2..] the waiters' counts, each >= 1: the caller's first
--
-- Returns the number of waiters served (serve): N decremented by their
-- counts; 0 when N holds fewer than the first count, -1 when N does not exist
-- (nothing changes, nothing is published).
return counted(KEYS[2], KEYS[1], function(v)
  if v == nil then
    return -1
  end
  local served, taken = serve(nil, v, 2)
  if served == 0 then
    return 0
  end
  redis.call('decrby', KEYS[1], taken)
  return record(KEYS[2], ARGV[1], served)
end)
