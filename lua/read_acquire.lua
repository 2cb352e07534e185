-- read_acquire.lua: take a reader's place in a read/write lock on this node (rwlock.go,
-- docs/design.md §3.13).
--
-- KEYS[1]  the writer key (an ordinary lock key)
-- KEYS[2]  the readers: a sorted set, reader id -> expiry in ms on this node's clock
-- KEYS[3]  the writer intent (rw_gate.lua)
-- KEYS[4]  the reader phase: a sorted set of the waiting readers (waiter id -> expiry in ms
--          on this node's clock), with the member "r" (score: the phase's end) while the read
--          phase that a writer's release opened (rw_release.lua) is open
-- ARGV[1]  the reader id
-- ARGV[2]  the reader's PX in milliseconds
-- ARGV[3]  how long a waiting reader's mark lasts, in milliseconds
-- ARGV[4]  the waiter id (the same for every attempt of one AcquireRead), or "" to leave no
--          mark (TryAcquireRead: it will not come back)
--
-- The read phase is open while "r" has not expired and some reader marked then has neither
-- entered nor expired; the last of them to enter ends it. The scripts count the set's first
-- members with ZRANGE rather than ZCARD, so that the ACL line of docs/operations.md needs no
-- command it did not list before the marks.
--
-- Returns 1 when the reader holds here (added, or its expiry moved on a resend); minus the
-- milliseconds left to the writer key or the intent when a writer holds, or waits outside a
-- read phase (>= 1 in magnitude); then nothing changed but the reader's mark.
local phase, waiter = KEYS[4], ARGV[4]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', phase, '-inf', now)
local open = false
if redis.call('ZSCORE', phase, 'r') then
  if #redis.call('ZRANGE', phase, 0, 1) > 1 then
    open = true
  else
    redis.call('DEL', phase) -- every reader marked has entered, or its mark expired
  end
end

-- refused marks that this reader waits and returns the refusal.
local function refused(left)
  if waiter ~= '' then
    redis.call('ZADD', phase, now + tonumber(ARGV[3]), waiter)
    local last = redis.call('ZRANGE', phase, -1, -1, 'WITHSCORES')
    redis.call('PEXPIRE', phase, math.max(tonumber(last[2]) - now, 1))
  end
  return -math.max(left, 1)
end

local w = redis.call('PTTL', KEYS[1])
if w ~= -2 then
  return refused(w)
end
if not open then
  local i = redis.call('PTTL', KEYS[3])
  if i ~= -2 then
    return refused(i)
  end
end
if waiter ~= '' and redis.call('ZREM', phase, waiter) == 1 and open and #redis.call('ZRANGE', phase, 0, 1) == 1 then
  redis.call('DEL', phase) -- the last reader the phase waited for is in: the phase ends
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local px = tonumber(ARGV[2])
redis.call('ZADD', KEYS[2], now + px, ARGV[1])
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[2], math.max(tonumber(last[2]) - now, 1))
return 1
