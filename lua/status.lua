-- status.lua: read what this node knows about a lock, atomically, changing nothing.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the own fence counter (the layout's)
-- KEYS[3]  the other layout's counter; all three in one cluster hash slot
-- KEYS[4]  optional: the key's waiter queue (queue.lua), in the same slot
--
-- Returns {holder id or "", remaining ms of the lock key or -2 when absent, own counter or "",
-- other counter or "", places in the waiter queue}. The places are the queue's size (ZCARD):
-- a waiter that died keeps its place until it expires. They are -1 without KEYS[4], or when
-- the node refuses ZCARD (an ACL user without the queue's commands).
local holder = redis.call('GET', KEYS[1]) or ''
local left = redis.call('PTTL', KEYS[1])
local places = -1
if KEYS[4] then
  local n = redis.pcall('ZCARD', KEYS[4])
  if type(n) == 'number' then
    places = n
  end
end
return {holder, left, redis.call('GET', KEYS[2]) or '', redis.call('GET', KEYS[3]) or '', places}
