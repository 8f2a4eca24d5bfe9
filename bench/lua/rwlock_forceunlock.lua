-- Reference implementation of RWLOCK.FORCEUNLOCK.
-- KEYS[1] lock hash, KEYS[2] channel; ARGV[1] 'read' or 'write'.
-- Reply: 1 deleted (it was in that mode), else 0. Publishes 0 for read, 1 for write.
if redis.call('hget', KEYS[1], 'mode') == ARGV[1] then
  redis.call('del', KEYS[1])
  redis.call('publish', KEYS[2], ARGV[1] == 'read' and 0 or 1)
  return 1
end
return 0
