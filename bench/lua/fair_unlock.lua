-- Reference implementation of FAIRLOCK.UNLOCK.
-- KEYS[1] lock hash, KEYS[2] queue, KEYS[3] deadline zset, KEYS[4] channel prefix (a waiter's
-- channel is prefix .. ':' .. owner), KEYS[5] latch key (only with a latch);
-- ARGV[1] owner, ARGV[2] lease ms, ARGV[3] now ms ('' = the server's clock), ARGV[4] latch ms.
-- Reply: nil not held; 0 holds remain; 1 released (or already free).
local key, queue, deadlines, chan, latch = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local owner, lease, latch_ms = ARGV[1], ARGV[2], ARGV[4]
local now = tonumber(ARGV[3])
if now == nil then
  local t = redis.call('time')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function record(v)
  if latch ~= nil then redis.call('set', latch, v, 'px', latch_ms) end
end
local function wake_head()
  local head = redis.call('lindex', queue, 0)
  if head ~= false then redis.call('publish', chan .. ':' .. head, 0) end
end
if latch ~= nil then
  local seen = redis.call('get', latch)
  if seen ~= false then return tonumber(seen) end
end
while true do
  local head = redis.call('lindex', queue, 0)
  if head == false then break end
  local deadline = redis.call('zscore', deadlines, head)
  if deadline == false or tonumber(deadline) > now then break end
  redis.call('zrem', deadlines, head)
  redis.call('lpop', queue)
end
if redis.call('exists', key) == 0 then
  wake_head()
  record(1)
  return 1
end
if redis.call('hexists', key, owner) == 0 then return nil end
if redis.call('hincrby', key, owner, -1) > 0 then
  redis.call('pexpire', key, lease)
  record(0)
  return 0
end
redis.call('del', key)
record(1)
wake_head()
return 1
