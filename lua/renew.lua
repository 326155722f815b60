-- renew: extend many holds in one call: the watchdog's batch (Redisson's LockTask
-- and ReadLockTask in one, and the permits of a permit-expirable semaphore,
-- which Redisson does not renew).
--
-- KEYS[1..m]   one key per hold, all in one hash slot
-- ARGV[1]      lease in ms
-- ARGV[2]      now: the client's wall clock in epoch ms
-- ARGV[3]      the permits' new expiry: now + lease, in epoch ms
-- ARGV[4]      '1': read each key extended once more after its extension (on
--              a connection with CLIENT TRACKING ON ... NOLOOP, the server
--              then tracks it again, as its own write stopped that silently);
--              '0' otherwise
-- ARGV[3i+2]   the kind of KEYS[i]'s hold: 'lock', 'read' or 'permit'
-- ARGV[3i+3]   its member: the owner's field in the hash KEYS[i] ('lock',
--              'read'), or the permit id in the sorted set KEYS[i] ('permit')
-- ARGV[3i+4]   'read': the read timeout prefix P ("{N}"); '' otherwise
--
-- lock    KEYS[i] has the field: PEXPIRE KEYS[i] to the lease.
-- read    KEYS[i] has the field, count c: PEXPIRE the hold's keys
--         "P:<field>:rwlock_timeout:1..c" to the lease, and KEYS[i] to the longer
--         of its own TTL and the lease (other readers' leases).
-- permit  KEYS[i] (the semaphore's "{N}:timeout") has the id with a score above
--         now (not expired by Redisson's rule, which reclaims a permit whose
--         score is <= the caller's now): its score becomes ARGV[3] (ZADD XX).
--         An expired permit is left for Redisson's reclaim and answers 0.
--
-- Returns an array of m integers: 1 when the hold was there and was extended, 0
-- when it was gone (no key, no field, no member, an expired permit). A key of
-- another type, or an unknown kind, answers 0 for its own entry instead of
-- failing the whole batch.
local out = {}
local lease, now, expiry, reread = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[4] == '1'
for i = 1, #KEYS do
  local kind, member, prefix = ARGV[3 * i + 2], ARGV[3 * i + 3], ARGV[3 * i + 4]
  out[i] = 0
  if kind == 'permit' then
    local score = redis.pcall('zscore', KEYS[i], member)
    if type(score) == 'string' and tonumber(score) > now then
      redis.call('zadd', KEYS[i], 'XX', expiry, member)
      out[i] = 1
    end
  elseif kind == 'lock' or kind == 'read' then
    local n = redis.pcall('hget', KEYS[i], member)
    if type(n) == 'string' then
      if kind == 'lock' then
        redis.call('pexpire', KEYS[i], lease)
      else
        for j = 1, tonumber(n) or 0 do
          redis.call('pexpire', prefix .. ':' .. member .. ':rwlock_timeout:' .. j, lease)
        end
        redis.call('pexpire', KEYS[i], math.max(redis.call('pttl', KEYS[i]), lease))
      end
      out[i] = 1
    end
  end
  if reread and out[i] == 1 then
    redis.call('pttl', KEYS[i])
  end
end
return out
