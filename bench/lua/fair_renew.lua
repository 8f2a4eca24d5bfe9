-- Reference implementation of FAIRLOCK.RENEW: exactly LOCK.RENEW.
-- KEYS[1] lock hash; ARGV[1] owner, ARGV[2] lease ms. Reply: 1 renewed, 0 not held by owner.
if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 1
end
return 0
