-- renew: extend many locks in one call (the watchdog's batch, Redisson's LockTask).
--
-- KEYS[1..m]  lock keys, all in one hash slot
-- ARGV[1]     lease in ms
-- ARGV[i+1]   owner field expected in KEYS[i]
--
-- Returns an array of m integers: 1 when KEYS[i] still had the owner's field and was
-- extended, 0 when the field (or the key) was gone. A key that holds another type
-- answers 0 instead of failing the whole batch.
local out = {}
for i = 1, #KEYS do
  local ok = redis.pcall('hexists', KEYS[i], ARGV[i + 1])
  if ok == 1 then
    redis.call('pexpire', KEYS[i], ARGV[1])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
