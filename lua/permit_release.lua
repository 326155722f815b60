-- permit_release: give back one permit of a permit-expirable semaphore by its
-- id (RPermitExpirableSemaphore tryRelease(id), §2.12). No reclaim.
--
-- KEYS[1]  semaphore N
-- KEYS[2]  permits Z = {N}:timeout
-- KEYS[3]  channel redisson_sc:{N}
-- KEYS[4]  request key
-- ARGV[1]  the id, 16 raw bytes
-- ARGV[2]  now: the caller's clock, epoch ms
-- ARGV[3]  publish command
-- ARGV[4]  request key time to live in ms
--
-- Returns 1 when the id was a live permit: removed, N incremented, the new
-- value published; 0 when it was there but expired (removed, returned to N and
-- published all the same, as Redisson does); -1 when Z does not have it.
return counted(KEYS[4], KEYS[1], function()
  local score = redis.call('zscore', KEYS[2], ARGV[1])
  if not score then
    return -1
  end
  redis.call('zrem', KEYS[2], ARGV[1])
  redis.call(ARGV[3], KEYS[3], redis.call('incrby', KEYS[1], 1))
  if tonumber(score) <= tonumber(ARGV[2]) then
    return record(KEYS[4], ARGV[4], 0)
  end
  return record(KEYS[4], ARGV[4], 1)
end)
