-- Reference implementation of FAIRLOCK.FORCEUNLOCK, with the clock passed in.
-- KEYS[1] lock hash, KEYS[2] queue, KEYS[3] zset, KEYS[4] channel prefix; ARGV[1] now ms.
-- Reply: 1 if the lock existed (the head waiter hears `0` on its own channel), else 0.
local key, queue, zset, prefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now = tonumber(ARGV[1])
while true do
  local head = redis.call('lindex', queue, 0)
  if head == false then break end
  local deadline = redis.call('zscore', zset, head)
  if deadline == false or tonumber(deadline) > now then break end
  redis.call('zrem', zset, head)
  redis.call('lpop', queue)
end
if redis.call('del', key) == 1 then
  local head = redis.call('lindex', queue, 0)
  if head ~= false then redis.call('publish', prefix .. ':' .. head, 0) end
  return 1
end
return 0
