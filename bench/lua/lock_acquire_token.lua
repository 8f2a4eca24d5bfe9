-- Reference implementation of LOCK.ACQUIRE ... TOKEN (Redisson's RFencedLock).
-- KEYS[1] lock hash, KEYS[2] token counter; ARGV[1] owner, ARGV[2] lease ms.
-- Reply: {-1, token} when acquired (every grant increments the counter), else {pttl, -1}.
local key, counter, owner, lease = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
if redis.call('exists', key) == 0 or redis.call('hexists', key, owner) == 1 then
  redis.call('hincrby', key, owner, 1)
  redis.call('pexpire', key, lease)
  return {-1, redis.call('incr', counter)}
end
return {redis.call('pttl', key), -1}
