-- Reference implementation of RWLOCK.WLOCK.
-- KEYS[1] lock hash; ARGV[1] owner, ARGV[2] lease ms. Reply: nil when acquired, else the PTTL.
local key, field, lease = KEYS[1], ARGV[1] .. ':write', ARGV[2]
local mode = redis.call('hget', key, 'mode')
if mode == false then
  redis.call('hset', key, 'mode', 'write')
  redis.call('hset', key, field, 1)
  redis.call('pexpire', key, lease)
  return nil
end
if mode == 'write' and redis.call('hexists', key, field) == 1 then
  redis.call('hincrby', key, field, 1)
  redis.call('pexpire', key, redis.call('pttl', key) + lease)
  return nil
end
return redis.call('pttl', key)
