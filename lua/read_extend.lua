-- read_extend.lua: give a reader's place a new expiry, only if it is still there and has
-- not expired (rwlock.go). KEYS[1] the readers; ARGV[1] the reader id, ARGV[2] the new PX in
-- milliseconds. Returns 1 when extended, 0 when the place is gone (never re-created).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not s or tonumber(s) <= now then
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[1], math.max(tonumber(last[2]) - now, 1))
return 1
