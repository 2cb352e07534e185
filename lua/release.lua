-- release.lua: compare-and-delete. Delete the lock key only if it still holds our id, and
-- then announce the release to waiters in other processes.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the holder id
-- ARGV[2]  optional: the wake-up channel of the key (wakeChannel in wake.go); absent or
--          empty for no announcement (the undo of a failed acquire, WithoutWakeups)
--
-- Returns 1 when our key was deleted, 0 when the key is absent or belongs to another holder.
-- The fence counter is never touched. The PUBLISH goes through redis.pcall, so a user whose
-- ACL forbids the command or the channel still releases: the error is dropped and the
-- reply is 1 all the same. The message carries the released holder id, so that a
-- subscriber hearing one release from several nodes counts it once.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  local n = redis.call('DEL', KEYS[1])
  if ARGV[2] and ARGV[2] ~= '' then
    redis.pcall('PUBLISH', ARGV[2], ARGV[1])
  end
  return n
end
return 0
