-- renew: extend many locks in one call (the watchdog's batch, Redisson's LockTask
-- and ReadLockTask in one).
--
-- KEYS[1..m]  lock keys, all in one hash slot
-- ARGV[1]     lease in ms
-- ARGV[2i]    owner field expected in KEYS[i]
-- ARGV[2i+1]  "" for an exclusive hold; for a read hold of a read/write lock, the
--             read timeout prefix P ("{N}"): the hold's keys
--             "P:<field>:rwlock_timeout:1..count" are extended too, and KEYS[i]
--             keeps its TTL if longer than the lease (other readers' leases)
--
-- Returns an array of m integers: 1 when KEYS[i] still had the owner's field and was
-- extended, 0 when the field (or the key) was gone. A key that holds another type
-- answers 0 instead of failing the whole batch.
local out = {}
local lease = tonumber(ARGV[1])
for i = 1, #KEYS do
  local field, prefix = ARGV[2 * i], ARGV[2 * i + 1]
  local n = redis.pcall('hget', KEYS[i], field)
  if type(n) == 'string' then
    if prefix == '' then
      redis.call('pexpire', KEYS[i], lease)
    else
      for j = 1, tonumber(n) do
        redis.call('pexpire', prefix .. ':' .. field .. ':rwlock_timeout:' .. j, lease)
      end
      redis.call('pexpire', KEYS[i], math.max(redis.call('pttl', KEYS[i]), lease))
    end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
