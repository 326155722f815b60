-- force_release: delete the lock whoever holds it, and publish when something was deleted.
--
-- KEYS[1]  lock key N
-- KEYS[2]  channel redisson_lock__channel:{N}
-- ARGV[1]  unlock message: "0"
-- ARGV[2]  publish command: PUBLISH or SPUBLISH
--
-- Returns 1 when N was deleted, 0 when N did not exist. A value at N that is not a
-- hash is left alone and fails with WRONGTYPE (HLEN raises it).
if redis.call('hlen', KEYS[1]) == 0 then
  return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1
