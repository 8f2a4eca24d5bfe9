-- Reference implementation of FAIRLOCK.CANCEL (Redisson's acquireFailed script).
-- KEYS[1] lock hash (unused), KEYS[2] queue, KEYS[3] zset; ARGV[1] owner, ARGV[2] wait ms.
-- Every waiter queued after owner moves forward by wait. Reply: 1 if owner was queued, else 0.
local queue, zset = KEYS[2], KEYS[3]
local owner, wait = ARGV[1], tonumber(ARGV[2])
local waiters = redis.call('lrange', queue, 0, -1)
local i = 1
while i <= #waiters and waiters[i] ~= owner do i = i + 1 end
for j = i + 1, #waiters do
  if redis.call('zscore', zset, waiters[j]) ~= false then
    redis.call('zincrby', zset, -wait, waiters[j])
  end
end
local in_zset = redis.call('zrem', zset, owner)
local in_queue = redis.call('lrem', queue, 0, owner)
if in_zset + in_queue > 0 then return 1 end
return 0
