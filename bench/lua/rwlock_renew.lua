-- Reference implementation of RWLOCK.RENEW.
-- KEYS[1] lock hash, KEYS[2] key prefix ('{key}', or key when it has a '{');
-- ARGV[1] owner, ARGV[2] lease ms. Reply: 1 renewed, 0 the owner holds nothing.
local key, keyprefix, owner, lease = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local reads = redis.call('hget', key, owner)
local writes = redis.call('hget', key, owner .. ':write')
if reads == false and writes == false then return 0 end
if reads ~= false then
  for i = tonumber(reads), 1, -1 do
    redis.call('pexpire', keyprefix .. ':' .. owner .. ':rwlock_timeout:' .. i, lease)
  end
end
redis.call('pexpire', key, lease)
return 1
