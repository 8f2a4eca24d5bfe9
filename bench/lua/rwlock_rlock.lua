-- Reference implementation of RWLOCK.RLOCK, written from DESIGN.md section 3.
-- KEYS[1] lock hash, KEYS[2] the owner's timeout prefix T (suffix(key, owner) .. ':rwlock_timeout');
-- ARGV[1] owner, ARGV[2] lease ms. Reply: nil when acquired, else the lock's PTTL.
local key, t, owner, lease = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local mode = redis.call('hget', key, 'mode')
if mode == false then
  redis.call('hset', key, 'mode', 'read')
  redis.call('hset', key, owner, 1)
  redis.call('set', t .. ':1', 1, 'px', lease)
  redis.call('pexpire', key, lease)
  return nil
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', key, owner .. ':write') == 1) then
  local n = redis.call('hincrby', key, owner, 1)
  redis.call('set', t .. ':' .. n, 1, 'px', lease)
  redis.call('pexpire', key, math.max(redis.call('pttl', key), tonumber(lease)))
  return nil
end
return redis.call('pttl', key)
