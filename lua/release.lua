-- release.lua: compare-and-delete. Delete the lock key only if it still holds our id.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the holder id
--
-- Returns 1 when our key was deleted, 0 when the key is absent or belongs to another holder.
-- The fence counter is never touched.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
