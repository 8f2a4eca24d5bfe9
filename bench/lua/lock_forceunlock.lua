-- Reference implementation of LOCK.FORCEUNLOCK.
-- KEYS[1] lock hash, KEYS[2] unlock channel. Reply: 1 deleted, 0 was free.
if redis.call('del', KEYS[1]) == 1 then
  redis.call('publish', KEYS[2], 0)
  return 1
end
return 0
