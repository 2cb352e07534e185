-- release_multi.lua: compare-and-delete for a multi-key lock. Delete every lock key that
-- still holds our id on this node; leave the others alone.
--
-- KEYS     the lock keys
-- ARGV[1]  the holder id
-- ARGV[2]  optional: the wake-up channel prefix (WakeChannelPrefix); each key deleted is
--          announced on prefix + key, as release.lua does for one key. Absent or empty for
--          no announcement (the undo of a failed acquire, WithoutWakeups)
--
-- Returns 1 when every key held our id and was deleted, 0 when some key was absent or
-- another holder's (the keys that were ours are deleted all the same). Counters are untouched.
-- The PUBLISH goes through redis.pcall: an ACL without the channel still releases.
local all = 1
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('DEL', KEYS[i])
    if ARGV[2] and ARGV[2] ~= '' then
      redis.pcall('PUBLISH', ARGV[2] .. KEYS[i], ARGV[1])
    end
  else
    all = 0
  end
end
return all
