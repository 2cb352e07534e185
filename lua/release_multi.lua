-- release_multi.lua: compare-and-delete for a multi-key lock. Delete every lock key that
-- still holds our id on this node; leave the others alone.
--
-- KEYS     the n lock keys; with the queues, then each key's waiter queue and waiters hash
--          (queue.lua): KEYS[n + 2i - 1] and KEYS[n + 2i] for the i-th key
-- ARGV[1]  the holder id
-- ARGV[2]  optional: the wake-up channel prefix (WakeChannelPrefix); each key deleted is
--          announced on prefix + key, as release.lua does for one key. Absent or empty for
--          no announcement (the undo of a failed acquire, WithoutWakeups)
-- With the queues:
-- ARGV[3]  n
-- ARGV[4]  the turn channel prefix: the head of each deleted key's queue is told, as
--          release.lua does
-- ARGV[5]  the releasing Client's id; its places in the queues are kept as they are
--
-- Returns 1 when every key held our id and was deleted, 0 when some key was absent or
-- another holder's (the keys that were ours are deleted all the same). Counters are untouched.
-- The PUBLISH goes through redis.pcall: an ACL without the channel still releases.
local n = #KEYS
if ARGV[3] then
  n = tonumber(ARGV[3])
end
-- Every key is read before the first is deleted: a GET that fails (a key of another type)
-- then fails the script with nothing changed.
local ours = {}
for i = 1, n do
  ours[i] = redis.call('GET', KEYS[i]) == ARGV[1]
end
local all = 1
for i = 1, n do
  if ours[i] then
    redis.call('DEL', KEYS[i])
    if ARGV[2] and ARGV[2] ~= '' then
      redis.pcall('PUBLISH', ARGV[2] .. KEYS[i], ARGV[1])
    end
    if n < #KEYS then
      pcall(qhandoff, KEYS[n + 2 * i - 1], KEYS[n + 2 * i], KEYS[i], ARGV[1], ARGV[4], ARGV[5], '', '0')
    end
  else
    all = 0
  end
end
return all
