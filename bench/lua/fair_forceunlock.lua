-- Reference implementation of FAIRLOCK.FORCEUNLOCK.
-- KEYS[1] lock hash, KEYS[2] queue, KEYS[3] deadline zset, KEYS[4] channel prefix;
-- ARGV[1] now ms ('' = the server's clock). Reply: 1 deleted, 0 was free.
local key, queue, deadlines, chan = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now = tonumber(ARGV[1])
if now == nil then
  local t = redis.call('time')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
while true do
  local head = redis.call('lindex', queue, 0)
  if head == false then break end
  local deadline = redis.call('zscore', deadlines, head)
  if deadline == false or tonumber(deadline) > now then break end
  redis.call('zrem', deadlines, head)
  redis.call('lpop', queue)
end
if redis.call('del', key) == 1 then
  local head = redis.call('lindex', queue, 0)
  if head ~= false then redis.call('publish', chan .. ':' .. head, 0) end
  return 1
end
return 0
