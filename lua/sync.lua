-- sync: what the synchronizers' scripts share (semaphore, permit-expirable
-- semaphore, countdown latch: protocol §2.11–§2.13); prepended to each of them.

-- counter(key) returns the integer count at key, or nil when key is absent.
-- A key of another type fails the script with Redis' WRONGTYPE error; a string
-- that is not an integer returns, as second value, an error reply whose
-- "WRONGTYPE" prefix the clients read the same way. Nothing is written.
local function counter(key)
  local v = redis.call('get', key)
  if v == false then
    return nil
  end
  if string.match(v, '^%-?%d+$') == nil then
    return nil, redis.error_reply('WRONGTYPE the value at ' .. key .. ' is not an integer count')
  end
  return tonumber(v)
end

-- reclaim returns to the pool n the permits of the zset z whose expiry (score)
-- is not after now, at most limit of them when limit is given, and publishes the
-- new available count on c when it is positive (Redisson's reclaim step, §2.12).
-- It returns that count, or nil when no permit had expired (n is unchanged).
local function reclaim(n, z, c, now, limit, publish)
  local expired
  if limit then
    expired = redis.call('zrangebyscore', z, 0, now, 'limit', 0, limit)
  else
    expired = redis.call('zrangebyscore', z, 0, now)
  end
  if #expired == 0 then
    return
  end
  redis.call('zrem', z, unpack(expired))
  local v = redis.call('incrby', n, #expired)
  if v > 0 then
    redis.call(publish, c, v)
  end
  return v
end

-- A request key (holdfast_request:{N}:<id>) records that one call ran, for
-- PX = the client's retry window: go-redis resends a script whose reply was
-- lost, and the second execution must answer as the first instead of applying
-- the change twice. replayed(req) is what the first execution recorded, or nil;
-- record(req, ttl, v) records v and returns it.
local function replayed(req)
  local v = redis.call('get', req)
  if v then
    return tonumber(v)
  end
  return nil
end

local function record(req, ttl, v)
  redis.call('set', req, v, 'px', ttl)
  return v
end

-- counted(req, key, body) is how a script that counts begins: it answers what
-- the first execution of the request req recorded, if one did (req nil: no
-- request), an error reply when key is not a count, and otherwise body(v), v
-- being the count at key (nil when absent).
local function counted(req, key, body)
  if req then
    local done = replayed(req)
    if done then
      return done
    end
  end
  local v, bad = counter(key)
  if bad then
    return bad
  end
  return body(v)
end

-- serve(z, v, i) serves, from v available permits, waiters of one client
-- listed in ARGV from index i, in their order, while v covers the next one's
-- count (a waiter that does not fit holds back those behind it). For a
-- semaphore (z nil) each waiter is its count; for a permit-expirable
-- semaphore it is its count, its permits' expiry, then their ids, added to z.
-- It returns the number of waiters served and the permits they took (an id z
-- has already, from an earlier execution of the same call, is not taken
-- twice); the caller takes them from the available count.
local function serve(z, v, i)
  local served, taken = 0, 0
  while i <= #ARGV do
    local want = tonumber(ARGV[i])
    if v - taken < want then
      break
    end
    if z then
      for j = i + 2, i + 1 + want do
        taken = taken + redis.call('zadd', z, ARGV[i + 1], ARGV[j])
      end
      i = i + 2 + want
    else
      taken = taken + want
      i = i + 1
    end
    served = served + 1
  end
  return served, taken
end
