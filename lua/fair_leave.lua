-- fair_leave: take a waiter that gives up out of a fair lock's queue
-- (Redisson's acquireFailed).
--
-- KEYS[1]  lock key N
-- KEYS[2]  queue redisson_lock_queue:{N}
-- KEYS[3]  deadlines redisson_lock_timeout:{N}
-- ARGV[1]  the waiter's owner field
-- ARGV[2]  its wait in ms, as it queued with
-- ARGV[3]  publish command: PUBLISH or SPUBLISH
-- ARGV[4]  the waiters' channel prefix redisson_lock__channel:{N}
--
-- Returns 1 when the waiter was queued, 0 when not.
--
-- As Redisson's: the waiters behind it have their deadlines ARGV[2] sooner.
-- Added: when the waiter was the head and N is free, the new head is woken
-- ("0" on its channel), so that a waiter giving up just as the lock was
-- released to it does not leave the next one asleep.
local pos = redis.call('lpos', KEYS[2], ARGV[1])
if not pos then
  redis.call('zrem', KEYS[3], ARGV[1])
  return 0
end
local behind = redis.call('lrange', KEYS[2], pos + 1, -1)
for i = 1, #behind do
  redis.call('zincrby', KEYS[3], -tonumber(ARGV[2]), behind[i])
end
redis.call('lrem', KEYS[2], 0, ARGV[1])
redis.call('zrem', KEYS[3], ARGV[1])
if pos == 0 and redis.call('exists', KEYS[1]) == 0 then
  local head = redis.call('lindex', KEYS[2], 0)
  if head then
    redis.call(ARGV[3], ARGV[4] .. ':' .. head, '0')
  end
end
return 1
