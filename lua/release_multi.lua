-- release_multi.lua: compare-and-delete for a multi-key lock. Delete every lock key that
-- still holds our id on this node; leave the others alone.
--
-- KEYS     the lock keys
-- ARGV[1]  the holder id
--
-- Returns 1 when every key held our id and was deleted, 0 when some key was absent or
-- another holder's (the keys that were ours are deleted all the same). Counters are untouched.
local all = 1
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('DEL', KEYS[i])
  else
    all = 0
  end
end
return all
