-- Reference implementation of RWLOCK.UNLOCK ... READ.
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3] the owner's timeout prefix T, KEYS[4] key prefix
-- ('{key}', or key when it has a '{'), KEYS[5] latch key (only with a latch);
-- ARGV[1] owner, ARGV[2] lease ms (unused), ARGV[3] latch ms (only with a latch).
-- Reply: nil not held; 0 still held (TTL = longest remaining read hold); 1 released.
local key, channel, t, keyprefix, latch = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local owner, latch_ms = ARGV[1], ARGV[3]
local function record(v)
  if latch ~= nil then redis.call('set', latch, v, 'px', latch_ms) end
end
if latch ~= nil then
  local seen = redis.call('get', latch)
  if seen ~= false then return tonumber(seen) end
end
local mode = redis.call('hget', key, 'mode')
if mode == false then
  redis.call('publish', channel, 0)
  record(1)
  return nil
end
if redis.call('hexists', key, owner) == 0 then return nil end
local left = redis.call('hincrby', key, owner, -1)
if left == 0 then redis.call('hdel', key, owner) end
redis.call('del', t .. ':' .. (left + 1))
if redis.call('hlen', key) > 1 then
  local max = -3
  for _, field in ipairs(redis.call('hkeys', key)) do
    local count = tonumber(redis.call('hget', key, field))
    if type(count) == 'number' then
      for i = count, 1, -1 do
        max = math.max(max, redis.call('pttl', keyprefix .. ':' .. field .. ':rwlock_timeout:' .. i))
      end
    end
  end
  if max > 0 then
    redis.call('pexpire', key, max)
    record(0)
    return 0
  end
  if mode == 'write' then
    record(0)
    return 0
  end
end
redis.call('del', key)
redis.call('publish', channel, 0)
record(1)
return 1
