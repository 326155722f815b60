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
-- ARGV[4]  k, the number of ids
-- ARGV[5]  '1': serve the waiters only if no other client listens on KEYS[3]
-- ARGV[6..5+k] the ids, 16 raw bytes each
-- ARGV[6+k..] waiters of the releasing client to serve (serve, permit layout)
--
-- If any id is not in Z or has expired (score <= now), returns 0 and changes
-- nothing. Else reclaims every expired permit, removes the ids, serves the
-- waiters from their number r, adds to N what is left of r and publishes it
-- (the delta, as Redisson does; nothing when waiters were served and none is
-- left). The first execution answers r + (k + 1) × the waiters served (one
-- integer: no array to parse); a second one, from the record, r alone (the
-- waiters' ids in Z are their record).
return counted(KEYS[4], KEYS[1], function(v)
  local now, k = tonumber(ARGV[1]), tonumber(ARGV[4])
  for i = 6, 5 + k do
    local score = redis.call('zscore', KEYS[2], ARGV[i])
    if not score or tonumber(score) <= now then
      return 0
    end
  end
  v = reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[1], nil, ARGV[2]) or v
  local r = redis.call('zrem', KEYS[2], unpack(ARGV, 6, 5 + k))
  local served, taken = 0, 0
  if #ARGV >= 6 + k and (ARGV[5] ~= '1' or redis.call('pubsub', 'numsub', KEYS[3])[2] <= 1) then
    served, taken = serve(KEYS[2], (v or 0) + r, 6 + k)
  end
  redis.call('incrby', KEYS[1], r - taken)
  if served == 0 or r > taken then
    redis.call(ARGV[2], KEYS[3], r - taken)
  end
  return record(KEYS[4], ARGV[3], r) + (k + 1) * served
end)
