-- lock_shape: what a lock's hash looks like, the one rule every script (and
-- the holdfast command, through lua.LockShape) applies before it takes a hash
-- for a lock. Prepended to the scripts that need it; defines not_a_lock.
--
-- A lock hash, of any Redisson lock kind (RLock, fair, fenced, spin,
-- non-reentrant, either side of a read/write lock), has only:
--   owner fields "<client id>:<owner id>" (":write" appended on a read/write
--   lock's write side): a ':' in the field, a positive integer count as value;
--   on a read/write lock, the field "mode" with the value "read" or "write".
--
-- not_a_lock(key) returns nil when the hash at key (or nothing) is a lock, and
-- otherwise the error reply the script returns, whose "WRONGTYPE" prefix the
-- clients read as Redis' own WRONGTYPE: the key holds something else.
local function not_a_lock(key)
  local h = redis.call('hgetall', key)
  for i = 1, #h, 2 do
    local f, v = h[i], h[i + 1]
    local ok
    if f == 'mode' then
      ok = v == 'read' or v == 'write'
    else
      ok = string.find(f, ':', 1, true) ~= nil and string.match(v, '^[1-9]%d*$') ~= nil
    end
    if not ok then
      return redis.error_reply('WRONGTYPE the hash at ' .. key .. ' is not a lock (field ' .. f .. ')')
    end
  end
  return nil
end
