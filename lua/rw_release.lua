-- rw_release.lua: a read/write lock's writer releases (rwlock.go, docs/design.md §3.13):
-- release.lua's compare-and-delete and announcement, and, when readers were refused while
-- this writer held or waited, the read phase, in which those readers go before the next
-- writer.
--
-- KEYS[1]  the writer key
-- KEYS[2]  the reader phase (read_acquire.lua): the waiting readers by expiry
-- ARGV[1]  the holder id
-- ARGV[2]  the writer key's wake-up channel, or empty for no announcement
-- ARGV[3]  the longest the read phase may last, in milliseconds (it ends sooner when the last
--          reader it waits for enters)
--
-- Returns 1 when our key was deleted, 0 when it is absent or another holder's.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZREM', KEYS[2], 'r')
if #redis.call('ZRANGE', KEYS[2], 0, 0) > 0 then
  local ends = now + tonumber(ARGV[3])
  redis.call('ZADD', KEYS[2], ends, 'r')
  local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
  redis.call('PEXPIRE', KEYS[2], math.max(tonumber(last[2]) - now, 1))
end
if ARGV[2] ~= '' then
  redis.pcall('PUBLISH', ARGV[2], ARGV[1])
end
return 1
