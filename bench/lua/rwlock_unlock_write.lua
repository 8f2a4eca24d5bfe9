-- Reference implementation of RWLOCK.UNLOCK ... WRITE.
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3] latch key (only with a latch);
-- ARGV[1] owner, ARGV[2] lease ms, ARGV[3] latch ms (only with a latch).
-- Reply: nil not the writer; 0 write holds remain; 1 released (or downgraded to read).
local key, channel, latch = KEYS[1], KEYS[2], KEYS[3]
local field, lease, latch_ms = ARGV[1] .. ':write', ARGV[2], ARGV[3]
local function record(v)
  if latch ~= nil then redis.call('set', latch, v, 'px', latch_ms) end
end
if latch ~= nil then
  local seen = redis.call('get', latch)
  if seen ~= false then return tonumber(seen) end
end
local mode = redis.call('hget', key, 'mode')
if mode == false then
  redis.call('publish', channel, 1)
  record(1)
  return nil
end
if mode ~= 'write' or redis.call('hexists', key, field) == 0 then return nil end
if redis.call('hincrby', key, field, -1) > 0 then
  redis.call('pexpire', key, lease)
  record(0)
  return 0
end
redis.call('hdel', key, field)
if redis.call('hlen', key) == 1 then
  redis.call('del', key)
  redis.call('publish', channel, 1)
else
  redis.call('hset', key, 'mode', 'read')
end
record(1)
return 1
