-- permit_total: make a permit-expirable semaphore's total (available plus
-- acquired, expired-but-unreclaimed permits included) n (setPermits, §2.12),
-- by adding the difference to the available count, which may become negative.
-- No reclaim.
--
-- KEYS[1]  semaphore N
-- KEYS[2]  permits Z = {N}:timeout
-- KEYS[3]  channel redisson_sc:{N}
-- ARGV[1]  n >= 0
-- ARGV[2]  publish command
--
-- Publishes n (the total) when something changed; returns 1. Setting a total
-- is idempotent: a retried execution changes nothing more.
return counted(nil, KEYS[1], function(v)
  local n = tonumber(ARGV[1])
  if v == nil then
    redis.call('set', KEYS[1], n)
    redis.call(ARGV[2], KEYS[3], n)
    return 1
  end
  local total = redis.call('zcard', KEYS[2]) + v
  if total ~= n then
    redis.call('incrby', KEYS[1], n - total)
    redis.call(ARGV[2], KEYS[3], n)
  end
  return 1
end)
