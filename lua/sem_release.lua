-- sem_release: give n permits to a semaphore (RSemaphore release and
-- releaseIfExists, §2.11; the permit-expirable semaphore never uses it), and
-- hand them to waiters of the releasing client in the same call.
--
-- KEYS[1]  semaphore N
-- KEYS[2]  channel redisson_sc:{N}
-- KEYS[3]  request key
-- ARGV[1]  n >= 1
-- ARGV[2]  publish command
-- ARGV[3]  request key time to live in ms
-- ARGV[4]  '1': only if N exists (releaseIfExists); '0': create N if absent
-- ARGV[5]  '1': serve the waiters only if no other client listens on KEYS[2]
--          (the releasing client has served its own often enough in a row)
-- ARGV[6..] the counts of the releasing client's waiters to serve (serve)
--
-- Returns 0 when ARGV[4] is '1' and N is absent (nothing changes); else
-- 1 + the number of waiters served, after adding to N the n permits less
-- those served, and publishing on KEYS[2] the count N holds then, as
-- Redisson publishes the new count: the permits handed over are not in it.
-- A release that served waiters and left no permit publishes nothing: its
-- message would wake nobody.
return counted(KEYS[3], KEYS[1], function(v)
  if v == nil and ARGV[4] == '1' then
    return 0
  end
  local n = tonumber(ARGV[1])
  local served, taken = 0, 0
  if #ARGV >= 6 and (ARGV[5] ~= '1' or redis.call('pubsub', 'numsub', KEYS[2])[2] <= 1) then
    served, taken = serve(nil, (v or 0) + n, 6)
  end
  local left = redis.call('incrby', KEYS[1], n - taken)
  if served == 0 or left > 0 then
    redis.call(ARGV[2], KEYS[2], left)
  end
  return record(KEYS[3], ARGV[3], 1 + served)
end)
