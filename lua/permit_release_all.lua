-- permit_release_all: give back several permits of a permit-expirable
-- semaphore, all or none (RPermitExpirableSemaphore tryRelease(ids) since
-- Redisson 3.41.0, §2.12).
--
-- KEYS[1]  semaphore N
-- KEYS[2]  permits Z = {N}:timeout
-- KEYS[3]  channel redisson_sc:{N}
-- KEYS[4]  request key
-- ARGV[1]  now: the caller's clock, epoch ms
-- ARGV[2]  publish command
-- ARGV[3]  request key time to live in ms
-- ARGV[4..] the ids, 16 raw bytes each
--
-- If any id is not in Z or has expired (score <= now), returns 0 and changes
-- nothing. Else reclaims every expired permit, removes the ids, adds their
-- number r to N, publishes r (the delta, as Redisson does) and returns r.
return counted(KEYS[4], KEYS[1], function()
  local now = tonumber(ARGV[1])
  for i = 4, #ARGV do
    local score = redis.call('zscore', KEYS[2], ARGV[i])
    if not score or tonumber(score) <= now then
      return 0
    end
  end
  reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[1], nil, ARGV[2])
  local r = redis.call('zrem', KEYS[2], unpack(ARGV, 4))
  redis.call('incrby', KEYS[1], r)
  redis.call(ARGV[2], KEYS[3], r)
  return record(KEYS[4], ARGV[3], r)
end)
