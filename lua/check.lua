-- check: look at many holds in one call, changing nothing: the watchdog's look
-- at the holds whose keys an invalidation named, or whose connection to Redis
-- was broken, and its first look at a new hold. Run on a connection with
-- CLIENT TRACKING on, its reads make the server track the keys for that
-- connection, so that the next change to one of them is told at once.
--
-- KEYS[1..m]   one key per hold, all in one hash slot
-- ARGV[1]      now: the client's wall clock in epoch ms
-- ARGV[2i]     the kind of KEYS[i]'s hold: 'lock', 'read' or 'permit'
-- ARGV[2i+1]   its member: the owner's field in the hash KEYS[i] ('lock',
--              'read'), or the permit id in the sorted set KEYS[i] ('permit')
--
-- Returns an array of m integers, one per hold: -2 when it is gone (no key, no
-- field, no member, a permit whose score is not after now: the same rules as
-- renew.lua's), else how long it has left in ms: the key's PTTL for a lock or
-- read hold; for a permit the score less now, or the key's PTTL if the key
-- expires sooner; -1 when nothing expires. A key of another type is a hold
-- gone, for its own entry only.
local out = {}
local now = tonumber(ARGV[1])
for i = 1, #KEYS do
  local kind, member = ARGV[2 * i], ARGV[2 * i + 1]
  out[i] = -2
  if kind == 'permit' then
    local score = redis.pcall('zscore', KEYS[i], member)
    if type(score) == 'string' and tonumber(score) > now then
      local left, ttl = -1, redis.call('pttl', KEYS[i])
      if score ~= '922337203685477' then
        left = tonumber(score) - now
      end
      if ttl >= 0 and (left < 0 or ttl < left) then
        left = ttl
      end
      out[i] = left
    end
  elseif kind == 'lock' or kind == 'read' then
    local n = redis.pcall('hexists', KEYS[i], member)
    if n == 1 then
      out[i] = redis.call('pttl', KEYS[i])
    end
  end
end
return out
