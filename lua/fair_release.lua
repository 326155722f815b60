-- fair_release: give back every hold of the owner on a fair lock: delete its
-- field (with it N) and wake the queue's head. Partial releases are
-- release_partial.lua, as for RLock.
--
-- KEYS[1]  lock key N
-- KEYS[2]  queue redisson_lock_queue:{N}
-- KEYS[3]  deadlines redisson_lock_timeout:{N}
-- KEYS[4]  unlock latch redisson_unlock_latch:{N}:<request id>
-- ARGV[1]  owner field
-- ARGV[2]  latch time to live in ms
-- ARGV[3]  publish command: PUBLISH or SPUBLISH
-- ARGV[4]  now: the client's wall clock, epoch ms
-- ARGV[5]  the waiters' channel prefix redisson_lock__channel:{N}
--
-- Returns
--   1    released: the owner's field deleted (with it N), and "0" published on
--        the channel of the queue's head, "<ARGV[5]>:<head field>", if any
--   nil  not held by this owner (lock unchanged); when N is gone the head is
--        woken all the same, as Redisson does
--
-- Stale heads are dropped first, as in fair_acquire.lua. A second execution of
-- the same request answers from the latch what the first one did.
local function wakeHead()
  local head = redis.call('lindex', KEYS[2], 0)
  if head then
    redis.call(ARGV[3], ARGV[5] .. ':' .. head, '0')
  end
end

local now = tonumber(ARGV[4])
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then break end
  local t = redis.call('zscore', KEYS[3], head)
  if not t or tonumber(t) > now then break end
  redis.call('zrem', KEYS[3], head)
  redis.call('lpop', KEYS[2])
end

if redis.call('hdel', KEYS[1], ARGV[1]) == 0 then
  local latch = redis.call('get', KEYS[4])
  if latch then
    return tonumber(latch)
  end
  if redis.call('exists', KEYS[1]) == 0 then
    wakeHead()
  end
  return nil
end
if redis.call('exists', KEYS[1]) == 0 then
  wakeHead()
end
redis.call('set', KEYS[4], '1', 'px', ARGV[2])
return 1
