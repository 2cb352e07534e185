-- rw_gate.lua: a writer's gate of a read/write lock (rwlock.go, docs/design.md §3.13), put
-- in front of acquire.lua, whose body runs as acquire_body() below. The writer's key is an
-- ordinary lock key. The gate refuses it during a read phase and while readers hold, and then
-- marks that a writer waits (the intent), so that new readers are refused, outside a read
-- phase, until it has had its turn.
--
-- KEYS[1..3]  the writer key and its two fence counters, as acquire.lua's
-- KEYS[4]     the readers (a sorted set: reader id -> expiry in ms on this node's clock)
-- KEYS[5]     the writer intent: a waiting writer's id, with a short expiry
-- KEYS[6]     the reader phase (read_acquire.lua): the waiting readers, and "r" while a read
--             phase is open
-- ARGV[1..5]  as acquire.lua's (id, PX, seed, counters' idle TTL, layout)
-- ARGV[6]     the intent's TTL in milliseconds
-- ARGV[7]     the waiting writer's Client id (the intent's value: the Client's writers share it)
--
-- Returns acquire.lua's reply, or, for a refusal, minus (the milliseconds it lasts, at least
-- 1) × 65536 + why: 0 the writer key is held (acquire.lua's refusal, re-encoded by
-- rw_gate_end.lua), 1 readers hold (until the last reader's place expires), 2 a read phase is
-- open (until its end); nothing changed but the intent.
local readers, intent, phase, intentMS, waiter = KEYS[4], KEYS[5], KEYS[6], ARGV[6], ARGV[7]
KEYS[4], KEYS[5], KEYS[6], ARGV[6], ARGV[7] = nil, nil, nil, nil, nil -- acquire.lua sees an unqueued acquire

-- wait marks this Client's intent (unless another writer's is there) and returns the refusal
-- for why.
local function wait(left, why)
  local cur = redis.call('GET', intent)
  if not cur or cur == waiter then
    redis.call('SET', intent, waiter, 'PX', intentMS)
  end
  return -(math.max(left, 1) * 65536 + why)
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', phase, '-inf', now)
local ends = redis.call('ZSCORE', phase, 'r')
if ends then
  if #redis.call('ZRANGE', phase, 0, 1) > 1 then
    return wait(tonumber(ends) - now, 2) -- readers marked before the last writer's release go first
  end
  redis.call('DEL', phase) -- every reader it waited for has entered, or its mark expired
end
redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
if last[2] then
  return wait(tonumber(last[2]) - now, 1)
end
local function acquire_body()
