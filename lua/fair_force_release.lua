-- fair_force_release: delete a fair lock whoever holds it, and wake the queue's
-- head when something was deleted.
--
-- KEYS[1]  lock key N
-- KEYS[2]  queue redisson_lock_queue:{N}
-- KEYS[3]  deadlines redisson_lock_timeout:{N}
-- ARGV[1]  now: the client's wall clock, epoch ms
-- ARGV[2]  publish command: PUBLISH or SPUBLISH
-- ARGV[3]  the waiters' channel prefix redisson_lock__channel:{N}
--
-- Returns 1 when N was deleted, 0 when N did not exist. A value at N that is not
-- a lock is left alone and fails with WRONGTYPE: HLEN raises it for a value that
-- is not a hash, not_a_lock (lock_shape.lua) for a hash of another shape. Stale
-- heads are dropped first, as in fair_acquire.lua. The queue stays.
if redis.call('hlen', KEYS[1]) == 0 then
  return 0
end
local bad = not_a_lock(KEYS[1])
if bad then
  return bad
end
local now = tonumber(ARGV[1])
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then break end
  local t = redis.call('zscore', KEYS[3], head)
  if not t or tonumber(t) > now then break end
  redis.call('zrem', KEYS[3], head)
  redis.call('lpop', KEYS[2])
end
redis.call('del', KEYS[1])
local head = redis.call('lindex', KEYS[2], 0)
if head then
  redis.call(ARGV[2], ARGV[3] .. ':' .. head, '0')
end
return 1
