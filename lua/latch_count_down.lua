-- latch_count_down: count a countdown latch down by one (RCountDownLatch
-- countDown, §2.13).
--
-- KEYS[1]  latch N (string: the count)
-- KEYS[2]  channel redisson_countdownlatch__channel__{N}
-- KEYS[3]  request key
-- ARGV[1]  publish command
-- ARGV[2]  request key time to live in ms
--
-- DECR N; at <= 0 delete N; exactly at 0 publish '0' (the latch opened).
-- Returns the new count; 0 for an absent N (nothing changes, as with
-- Redisson's DECR-then-DEL).
return counted(KEYS[3], KEYS[1], function(v)
  if v == nil then
    return 0
  end
  v = redis.call('decr', KEYS[1])
  if v <= 0 then
    redis.call('del', KEYS[1])
  end
  if v == 0 then
    redis.call(ARGV[1], KEYS[2], '0')
  end
  return record(KEYS[3], ARGV[2], v)
end)
