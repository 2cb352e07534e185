-- rw_gate.lua: a writer's gate of a read/write lock (rwlock.go, docs/design.md §3.13), put
-- in front of acquire.lua, whose body runs as acquire_body() below. The writer's key is an
-- ordinary lock key; the gate refuses it while readers hold, and then marks that a writer
-- waits, so that new readers are refused until it has its turn.
--
-- KEYS[1..3]  the writer key and its two fence counters, as acquire.lua's
-- KEYS[4]     the readers (a sorted set: reader id -> expiry in ms on this node's clock)
-- KEYS[5]     the writer intent: a waiting writer's id, with a short expiry
-- ARGV[1..5]  as acquire.lua's (id, PX, seed, counters' idle TTL, layout)
-- ARGV[6]     the intent's TTL in milliseconds
-- ARGV[7]     the waiting writer's Client id (the intent's value: the Client's writers share it)
--
-- Returns acquire.lua's reply, or, while readers hold, minus the milliseconds until the
-- last of them expires (a refusal, as for a held key; nothing changed but the intent).
local readers, intent, intentMS, waiter = KEYS[4], KEYS[5], ARGV[6], ARGV[7]
KEYS[4], KEYS[5], ARGV[6], ARGV[7] = nil, nil, nil, nil -- acquire.lua sees an unqueued acquire
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
if last[2] then
  local cur = redis.call('GET', intent)
  if not cur or cur == waiter then
    redis.call('SET', intent, waiter, 'PX', intentMS)
  end
  return -math.max(tonumber(last[2]) - now, 1)
end
local function acquire_body()
