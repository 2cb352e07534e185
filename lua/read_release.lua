-- read_release.lua: remove a reader's place (rwlock.go). KEYS[1] the readers; ARGV[1] the
-- reader id, ARGV[2] optional: the readers' wake-up channel, told of the release (pcall)
-- so that a waiting writer tries at once. Returns 1 when the place was there, 0 otherwise.
--
-- Optionally KEYS[2], the reader phase (read_acquire.lua), and ARGV[3], a waiter id: that
-- waiter's mark goes too (a reader that holds, sent to the nodes that refused it, waits no
-- longer), and a read phase whose last awaited reader that was ends.
if KEYS[2] and ARGV[3] and ARGV[3] ~= '' and redis.call('ZREM', KEYS[2], ARGV[3]) == 1 then
  if redis.call('ZSCORE', KEYS[2], 'r') and #redis.call('ZRANGE', KEYS[2], 0, 1) == 1 then
    redis.call('DEL', KEYS[2])
  end
end
local n = redis.call('ZREM', KEYS[1], ARGV[1])
if n == 1 and ARGV[2] and ARGV[2] ~= '' then
  redis.pcall('PUBLISH', ARGV[2], ARGV[1])
end
return n
