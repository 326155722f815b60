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
-- ARGV[5]  '1': serve the waiters only if no other client listens on KEYS[3]
-- ARGV[6..] waiters of the releasing client to serve (serve, permit layout)
--
-- Returns 1 when the id was a live permit: removed, returned to N and the new
-- value published; 0 when it was there but expired (removed, returned to N and
-- published all the same, as Redisson does); -1 when Z does not have it. The
-- permit returned serves the waiters first, then N has what is left: the
-- value published (nothing is, when waiters were served and none is left).
-- The first execution answers outcome + 4 × the waiters served (one integer:
-- no array to parse); a second one, from the record, the outcome alone (the
-- waiters' ids in Z are their record).
return counted(KEYS[4], KEYS[1], function(v)
  local score = redis.call('zscore', KEYS[2], ARGV[1])
  if not score then
    return -1
  end
  redis.call('zrem', KEYS[2], ARGV[1])
  local served, taken = 0, 0
  if #ARGV >= 6 and (ARGV[5] ~= '1' or redis.call('pubsub', 'numsub', KEYS[3])[2] <= 1) then
    served, taken = serve(KEYS[2], (v or 0) + 1, 6)
  end
  local left = redis.call('incrby', KEYS[1], 1 - taken)
  if served == 0 or left > 0 then
    redis.call(ARGV[3], KEYS[3], left)
  end
  local outcome = 1
  if tonumber(score) <= tonumber(ARGV[2]) then
    outcome = 0
  end
  return record(KEYS[4], ARGV[4], outcome) + 4 * served
end)
