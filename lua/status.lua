-- status.lua: read what this node knows about a lock, atomically, changing nothing.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fence counter key (same cluster hash slot as KEYS[1])
--
-- Returns {holder id or "", remaining ms of the lock key or -2 when absent, counter or ""}.
local holder = redis.call('GET', KEYS[1]) or ''
local left = redis.call('PTTL', KEYS[1])
local counter = redis.call('GET', KEYS[2]) or ''
return {holder, left, counter}
