-- Reference implementation of LOCK.UNLOCK.
-- KEYS[1] lock hash, KEYS[2] unlock channel, KEYS[3] latch key (only with a latch);
-- ARGV[1] owner, ARGV[2] lease ms, ARGV[3] latch ms (only with a latch).
-- Reply: nil not held by owner; 0 holds remain; 1 released. A latch replays the first outcome.
local key, channel, latch = KEYS[1], KEYS[2], KEYS[3]
local owner, lease, latch_ms = ARGV[1], ARGV[2], ARGV[3]
if latch ~= nil then
  local seen = redis.call('get', latch)
  if seen ~= false then return tonumber(seen) end
end
if redis.call('hexists', key, owner) == 0 then return nil end
if redis.call('hincrby', key, owner, -1) > 0 then
  redis.call('pexpire', key, lease)
  if latch ~= nil then redis.call('set', latch, 0, 'px', latch_ms) end
  return 0
end
redis.call('del', key)
redis.call('publish', channel, 0)
if latch ~= nil then redis.call('set', latch, 1, 'px', latch_ms) end
return 1
