-- Reference implementation of FAIRLOCK.CANCEL (Redisson's acquireFailed script).
-- KEYS[1] lock hash (unused), KEYS[2] queue, KEYS[3] deadline zset; ARGV[1] owner, ARGV[2] wait.
-- Reply: 1 if the owner was queued, else 0.
local queue, deadlines = KEYS[2], KEYS[3]
local owner, wait = ARGV[1], tonumber(ARGV[2])
local waiting = redis.call('lrange', queue, 0, -1)
local i = 1
while i <= #waiting and waiting[i] ~= owner do i = i + 1 end
for j = i + 1, #waiting do
  redis.call('zincrby', deadlines, -wait, waiting[j])
end
local had = redis.call('zrem', deadlines, owner)
local was = redis.call('lrem', queue, 0, owner)
if had + was > 0 then return 1 end
return 0
