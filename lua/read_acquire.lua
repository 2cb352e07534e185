-- read_acquire.lua: take a reader's place in a read/write lock on this node (rwlock.go,
-- docs/design.md §3.13).
--
-- KEYS[1]  the writer key (an ordinary lock key)
-- KEYS[2]  the readers: a sorted set, reader id -> expiry in ms on this node's clock
-- KEYS[3]  the writer intent (rw_gate.lua)
-- KEYS[4]  the reader phase: "w" while readers wait for a writer, "r" during the read phase
--          that the writer's release opens (rw_release.lua)
-- ARGV[1]  the reader id
-- ARGV[2]  the reader's PX in milliseconds
-- ARGV[3]  how long the mark that readers wait lasts, in milliseconds
--
-- Returns 1 when the reader holds here (added, or its expiry moved on a resend); minus the
-- milliseconds left to the writer key or the intent when a writer holds, or waits outside a
-- read phase (>= 1 in magnitude); then nothing changed but the mark that readers wait.
local phase = redis.call('GET', KEYS[4])

-- refused marks that readers wait (unless a read phase is open) and returns the refusal.
local function refused(left)
  if phase ~= 'r' then
    redis.call('SET', KEYS[4], 'w', 'PX', ARGV[3])
  end
  return -math.max(left, 1)
end

local w = redis.call('PTTL', KEYS[1])
if w ~= -2 then
  return refused(w)
end
if phase ~= 'r' then
  local i = redis.call('PTTL', KEYS[3])
  if i ~= -2 then
    return refused(i)
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local px = tonumber(ARGV[2])
redis.call('ZADD', KEYS[2], now + px, ARGV[1])
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[2], math.max(tonumber(last[2]) - now, 1))
return 1
