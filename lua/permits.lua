-- permits.lua: read which permits of a semaphore this node has taken, changing nothing
-- (semaphore.go, docs/design.md §3.11).
--
-- KEYS     the semaphore's permit keys, in order, all in one cluster hash slot
--
-- Returns, per key, its remaining milliseconds (PTTL): -2 when the key is absent here (the
-- permit is free on this node), -1 for a key without expiry (not one the library wrote).
local out = {}
for i, k in ipairs(KEYS) do
  out[i] = redis.call('PTTL', k)
end
return out
