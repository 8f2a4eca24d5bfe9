-- Reference implementation of LOCK.ACQUIRE, written from docs/design (DESIGN.md section 3).
-- KEYS[1] lock hash; ARGV[1] owner, ARGV[2] lease ms.
-- Reply: nil when acquired (first hold or reentry), else the lock's PTTL.
local key, owner, lease = KEYS[1], ARGV[1], ARGV[2]
if redis.call('exists', key) == 0 or redis.call('hexists', key, owner) == 1 then
  redis.call('hincrby', key, owner, 1)
  redis.call('pexpire', key, lease)
  return nil
end
return redis.call('pttl', key)
