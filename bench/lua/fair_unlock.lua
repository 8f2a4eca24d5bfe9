-- Reference implementation of FAIRLOCK.UNLOCK, with the clock passed in.
-- KEYS[1] lock hash, KEYS[2] queue, KEYS[3] zset, KEYS[4] channel prefix, KEYS[5] latch key
-- (only with a latch); ARGV[1] owner, ARGV[2] lease ms, ARGV[3] now ms, ARGV[4] latch ms.
-- Reply: nil not held by owner; 0 holds remain; 1 released (or already free). The head
-- waiter hears `0` on its own channel, KEYS[4] .. ':' .. head.
local key, queue, zset, prefix, latch = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local owner, lease, now, latch_ms = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
if latch ~= nil then
  local seen = redis.call('get', latch)
  if seen ~= false then return tonumber(seen) end
end
while true do
  local head = redis.call('lindex', queue, 0)
  if head == false then break end
  local deadline = redis.call('zscore', zset, head)
  if deadline == false or tonumber(deadline) > now then break end
  redis.call('zrem', zset, head)
  redis.call('lpop', queue)
end
local function notify_head()
  local head = redis.call('lindex', queue, 0)
  if head ~= false then redis.call('publish', prefix .. ':' .. head, 0) end
end
if redis.call('exists', key) == 0 then
  notify_head()
  if latch ~= nil then redis.call('set', latch, 1, 'px', latch_ms) end
  return 1
end
if redis.call('hexists', key, owner) == 0 then return nil end
if redis.call('hincrby', key, owner, -1) > 0 then
  redis.call('pexpire', key, lease)
  if latch ~= nil then redis.call('set', latch, 0, 'px', latch_ms) end
  return 0
end
redis.call('del', key)
if latch ~= nil then redis.call('set', latch, 1, 'px', latch_ms) end
notify_head()
return 1
