-- release: give back every hold of the owner: delete its field (with it N) and
-- publish, or hand N to a successor. Partial releases are release_partial.lua.
--
-- KEYS[1]  lock key N
-- KEYS[2]  channel redisson_lock__channel:{N}
-- KEYS[3]  unlock latch redisson_unlock_latch:{N}:<request id>
-- ARGV[1]  owner field
-- ARGV[2]  latch time to live in ms
-- ARGV[3]  publish command: PUBLISH or SPUBLISH; "" publishes nothing (spin locks)
-- ARGV[4]  (optional) successor owner field
-- ARGV[5]  (with ARGV[4]) successor lease in ms
-- ARGV[6]  (with ARGV[4]) s > 0, the hand-offs the releasing client made in a
--          row: hand off only if no other client, or more than s other
--          clients, listen on KEYS[2]
--          (a client keeps the lock for at most as many turns in a row as
--          there are other clients waiting, so that each published release's
--          race, one attempt per client, is paid once per that many turns);
--          "0": hand off whenever N is free after the delete
--
-- Returns
--   1    released: the owner's field deleted (with it N) and "0" published on KEYS[2]
--   2    handed off: N now belongs to the successor with count 1, nothing published
--   nil  not held by this owner (lock unchanged)
--
-- The owner's field goes whatever count Redis has: the caller gives back every
-- hold it knows of, and holds left by calls whose reply was lost go with them. A
-- second execution of the same request (go-redis retrying after a lost reply)
-- finds the field gone and answers from the latch (Redisson's unlock latch, issue
-- #4871) what the first one did, instead of "not held". A release that finds N
-- free costs three calls: HDEL, PUBLISH and the latch's SET.
if redis.call('hdel', KEYS[1], ARGV[1]) == 0 then
  local latch = redis.call('get', KEYS[3])
  if latch then
    return tonumber(latch)
  end
  return nil
end
local function mayHandOff()
  if ARGV[6] == '0' then
    return true
  end
  local others = redis.call('pubsub', 'numsub', KEYS[2])[2] - 1
  return others <= 0 or others > tonumber(ARGV[6])
end
if ARGV[4] and redis.call('exists', KEYS[1]) == 0 and mayHandOff() then
  redis.call('hset', KEYS[1], ARGV[4], 1)
  redis.call('pexpire', KEYS[1], ARGV[5])
  redis.call('set', KEYS[3], '2', 'px', ARGV[2])
  return 2
end
if ARGV[3] ~= '' then
  redis.call(ARGV[3], KEYS[2], '0')
end
redis.call('set', KEYS[3], '1', 'px', ARGV[2])
return 1
