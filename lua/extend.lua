-- extend.lua: compare-and-pexpire. Give our key a new TTL only if it still holds our id.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the holder id
-- ARGV[2]  the new TTL in milliseconds
--
-- Returns 1 when our key got the new TTL, 0 when the key is absent or belongs to another
-- holder. An expired key is never re-created. The fence counter is never touched.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
