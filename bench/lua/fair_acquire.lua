-- Reference implementation of FAIRLOCK.ACQUIRE (Redisson's RedissonFairLock acquire script),
-- with the clock passed in, as the module reads its own.
-- KEYS[1] lock hash, KEYS[2] queue list, KEYS[3] deadline zset;
-- ARGV[1] owner, ARGV[2] lease ms, ARGV[3] wait ms, ARGV[4] now ms, ARGV[5] "NOQUEUE" (optional).
-- Reply: nil acquired; with NOQUEUE 1 if not; else max(0, PTTL) if already queued, else the
-- base TTL the new deadline was computed from.
local key, queue, zset = KEYS[1], KEYS[2], KEYS[3]
local owner, lease, wait, now = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local noqueue = ARGV[5] ~= nil
-- 1. purge waiters whose deadline has passed
while true do
  local head = redis.call('lindex', queue, 0)
  if head == false then break end
  local deadline = redis.call('zscore', zset, head)
  if deadline == false or tonumber(deadline) > now then break end
  redis.call('zrem', zset, head)
  redis.call('lpop', queue)
end
-- 2. grant: free, and nobody queued or the caller first in line
if redis.call('exists', key) == 0
    and (redis.call('exists', queue) == 0 or redis.call('lindex', queue, 0) == owner) then
  redis.call('lpop', queue)
  redis.call('zrem', zset, owner)
  local waiters = redis.call('zrange', zset, 0, -1)
  for i = 1, #waiters do
    redis.call('zincrby', zset, -wait, waiters[i])
  end
  redis.call('hset', key, owner, 1)
  redis.call('pexpire', key, lease)
  return nil
end
-- 3. reentry
if redis.call('hexists', key, owner) == 1 then
  redis.call('hincrby', key, owner, 1)
  redis.call('pexpire', key, lease)
  return nil
end
if noqueue then return 1 end
-- 4. already queued
if redis.call('zscore', zset, owner) ~= false then
  return math.max(0, redis.call('pttl', key))
end
-- 5. enqueue behind the tail
local tail = redis.call('lindex', queue, -1)
local base
if tail ~= false and tail ~= owner and redis.call('zscore', zset, tail) ~= false then
  base = tonumber(redis.call('zscore', zset, tail)) - now
else
  base = redis.call('pttl', key)
end
if redis.call('zadd', zset, base + wait + now, owner) == 1 then
  redis.call('rpush', queue, owner)
end
return base
