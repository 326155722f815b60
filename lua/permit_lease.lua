-- permit_lease: read or set the lease of one permit of a permit-expirable
-- semaphore after reclaiming every expired permit (getLeaseTime and
-- updateLeaseTime, §2.12).
--
-- KEYS[1]  semaphore N
-- KEYS[2]  permits Z = {N}:timeout
-- KEYS[3]  channel redisson_sc:{N}
-- ARGV[1]  the id, 16 raw bytes
-- ARGV[2]  now: the caller's clock, epoch ms
-- ARGV[3]  publish command
-- ARGV[4]  (update) the new expiry: now + lease, or 922337203685477; absent
--          for a read
--
-- Read: returns -1 for a permit without lease, the remaining ms (> 0) for one
-- with a lease, 0 for an id Z does not have. Update: returns 1 when the id was
-- there and its expiry is now ARGV[4], else 0.
return counted(nil, KEYS[1], function()
  reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[2], nil, ARGV[3])
  local score = redis.call('zscore', KEYS[2], ARGV[1])
  if not score then
    return 0
  end
  if ARGV[4] then
    redis.call('zadd', KEYS[2], ARGV[4], ARGV[1])
    return 1
  end
  if score == '922337203685477' then
    return -1
  end
  return tonumber(score) - tonumber(ARGV[2])
end)
