-- Reference implementation of FAIRLOCK.ACQUIRE (Redisson's fair tryLock scripts).
-- KEYS[1] lock hash, KEYS[2] queue list, KEYS[3] deadline zset;
-- ARGV[1] owner, ARGV[2] lease ms, ARGV[3] wait ms, ARGV[4] now ms ('' = the server's clock),
-- ARGV[5] 'NOQUEUE' for the form that does not queue.
-- Reply: nil acquired; NOQUEUE: 1; already queued: max(0, PTTL); queued now: the base TTL.
local key, queue, deadlines = KEYS[1], KEYS[2], KEYS[3]
local owner, lease, wait = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now = tonumber(ARGV[4])
if now == nil then
  local t = redis.call('time')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- purge waiters at the head whose deadline passed
while true do
  local head = redis.call('lindex', queue, 0)
  if head == false then break end
  local deadline = redis.call('zscore', deadlines, head)
  if deadline == false or tonumber(deadline) > now then break end
  redis.call('zrem', deadlines, head)
  redis.call('lpop', queue)
end
-- free, and nobody ahead: take it; everyone behind moves up by wait
if redis.call('exists', key) == 0
    and (redis.call('exists', queue) == 0 or redis.call('lindex', queue, 0) == owner) then
  redis.call('lpop', queue)
  redis.call('zrem', deadlines, owner)
  for _, member in ipairs(redis.call('zrange', deadlines, 0, -1)) do
    redis.call('zincrby', deadlines, -wait, member)
  end
  redis.call('hset', key, owner, 1)
  redis.call('pexpire', key, lease)
  return nil
end
if redis.call('hexists', key, owner) == 1 then
  redis.call('hincrby', key, owner, 1)
  redis.call('pexpire', key, lease)
  return nil
end
if ARGV[5] == 'NOQUEUE' then return 1 end
if redis.call('zscore', deadlines, owner) ~= false then
  return math.max(0, redis.call('pttl', key))
end
local tail = redis.call('lindex', queue, -1)
local base
if tail ~= false and tail ~= owner and redis.call('zscore', deadlines, tail) ~= false then
  base = tonumber(redis.call('zscore', deadlines, tail)) - now
else
  base = redis.call('pttl', key)
end
if redis.call('zadd', deadlines, base + wait + now, owner) == 1 then
  redis.call('rpush', queue, owner)
end
return base
