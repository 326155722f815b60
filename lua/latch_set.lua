-- latch_set: set the count of a countdown latch that does not exist
-- (RCountDownLatch trySetCount, §2.13), or delete the latch (delete).
--
-- KEYS[1]  latch N
-- KEYS[2]  channel redisson_countdownlatch__channel__{N}
-- KEYS[3]  request key
-- ARGV[1]  publish command
-- ARGV[2]  request key time to live in ms
-- ARGV[3]  the count n >= 1; absent: delete
--
-- Set: when N is absent SET n, publish '1', return 1; else 0. Delete: when N
-- existed DEL it, publish '1', return 1; else 0. Java's waiters do not wake on
-- '1'; holdfast's awaiters read it, with N absent, as "deleted".
return counted(KEYS[3], KEYS[1], function(v)
  if ARGV[3] then
    if v ~= nil then
      return 0
    end
    redis.call('set', KEYS[1], ARGV[3])
  elseif v == nil then
    return 0
  else
    redis.call('del', KEYS[1])
  end
  redis.call(ARGV[1], KEYS[2], '1')
  return record(KEYS[3], ARGV[2], 1)
end)
