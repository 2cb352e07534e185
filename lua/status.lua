-- status.lua: read what this node knows about a lock, atomically, changing nothing.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the own fence counter (the layout's)
-- KEYS[3]  the other layout's counter; all three in one cluster hash slot
--
-- Returns {holder id or "", remaining ms of the lock key or -2 when absent, own counter or "",
-- other counter or ""}.
local holder = redis.call('GET', KEYS[1]) or ''
local left = redis.call('PTTL', KEYS[1])
return {holder, left, redis.call('GET', KEYS[2]) or '', redis.call('GET', KEYS[3]) or ''}
