-- read_release: give back k of an owner's c read holds on a read/write lock.
--
-- KEYS[1]  lock key N
-- KEYS[2]  channel redisson_rwlock:{N}
-- KEYS[3]  unlock latch redisson_unlock_latch:{N}:<request id>
-- ARGV[1]  owner field L
-- ARGV[2]  expected read count c before this release
-- ARGV[3]  k, the holds given back (1 <= k <= c)
-- ARGV[4]  latch time to live in ms
-- ARGV[5]  publish command: PUBLISH or SPUBLISH
-- ARGV[6]  read timeout prefix P ("{N}")
--
-- Returns
--   0    partial: L still holds c-k reads (also for a retried execution)
--   1    released: L holds no read any more; when nothing else holds N, N is
--        deleted and "0" published on KEYS[2]
--   nil  L held nothing (lock unchanged)
--   {n}  L's count in Redis is n, neither c nor c-k: nothing changed
--
-- As Redisson's: the timeout keys of the holds given back are deleted, and N's
-- TTL becomes the longest remaining TTL of any read hold's timeout key. When none
-- is alive (their owners died) and no writer holds N, N is deleted: the last live
-- reader's release clears zombie readers. A second execution of a final release
-- answers from the latch.
local c = tonumber(ARGV[2])
local k = tonumber(ARGV[3])
local n = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or 0)
if n == 0 then
  local latch = redis.call('get', KEYS[3])
  if latch then
    return tonumber(latch)
  end
  return nil
end
if n ~= c then
  if n == c - k then
    return 0
  end
  return {n}
end
local prefix = ARGV[6] .. ':'
for i = n - k + 1, n do
  redis.call('del', prefix .. ARGV[1] .. ':rwlock_timeout:' .. i)
end
local out = 0
if n == k then
  redis.call('hdel', KEYS[1], ARGV[1])
  redis.call('set', KEYS[3], '1', 'px', ARGV[4])
  out = 1
else
  redis.call('hincrby', KEYS[1], ARGV[1], -k)
end

local fields = redis.call('hgetall', KEYS[1])
local longest = -3
local mode
for i = 1, #fields, 2 do
  local count = tonumber(fields[i + 1])
  if fields[i] == 'mode' then
    mode = fields[i + 1]
  elseif count then
    for j = count, 1, -1 do
      longest = math.max(longest, redis.call('pttl', prefix .. fields[i] .. ':rwlock_timeout:' .. j))
    end
  end
end
if longest > 0 then
  redis.call('pexpire', KEYS[1], longest)
  return out
end
if mode == 'write' then
  return out
end
redis.call('del', KEYS[1])
redis.call(ARGV[5], KEYS[2], '0')
return out
