-- rw_release.lua: a read/write lock's writer releases (rwlock.go, docs/design.md §3.13):
-- release.lua's compare-and-delete and announcement, and, when readers were refused while
-- this writer held or waited, the read phase, in which the readers go before the next writer.
--
-- KEYS[1]  the writer key
-- KEYS[2]  the reader phase (read_acquire.lua)
-- ARGV[1]  the holder id
-- ARGV[2]  the writer key's wake-up channel, or empty for no announcement
-- ARGV[3]  the read phase's length in milliseconds
--
-- Returns 1 when our key was deleted, 0 when it is absent or another holder's.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
if redis.call('GET', KEYS[2]) == 'w' then
  redis.call('SET', KEYS[2], 'r', 'PX', ARGV[3])
end
if ARGV[2] ~= '' then
  redis.pcall('PUBLISH', ARGV[2], ARGV[1])
end
return 1
