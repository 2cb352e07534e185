-- read_release.lua: remove a reader's place (rwlock.go). KEYS[1] the readers; ARGV[1] the
-- reader id, ARGV[2] optional: the readers' wake-up channel, told of the release (pcall)
-- so that a waiting writer tries at once. Returns 1 when the place was there, 0 otherwise.
local n = redis.call('ZREM', KEYS[1], ARGV[1])
if n == 1 and ARGV[2] and ARGV[2] ~= '' then
  redis.pcall('PUBLISH', ARGV[2], ARGV[1])
end
return n
