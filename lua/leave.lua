-- leave.lua: a Client gives up waiting for a lock key (its last waiting Acquire of the key
-- ended without the lock): it leaves the key's waiter queue, and when it was the head of a
-- free key, the next waiter is told that its turn has come (queue.lua has the rules).
--
-- KEYS[1]  the lock key
-- KEYS[2]  the key's waiter queue
-- KEYS[3]  the queue's waiters hash
-- ARGV[1]  the Client's id
-- ARGV[2]  the turn channel prefix, or empty to tell nobody
-- ARGV[3]  an id for the message (random, 32 hex digits, as a holder id)
--
-- Returns 1. Nothing here touches the lock key or a counter.
pcall(function()
  if redis.call('EXISTS', KEYS[2]) == 0 then
    return
  end
  local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  qleave(KEYS[2], KEYS[3], ARGV[1])
  if head == ARGV[1] and ARGV[2] ~= '' and redis.call('EXISTS', KEYS[1]) == 0 then
    local now = qnow()
    local next = qhead(KEYS[2], KEYS[3], now)
    if next then
      redis.call('HSET', KEYS[3], '', now)
      qtell(KEYS[2], ARGV[2], next, ARGV[3] .. KEYS[1])
    end
  end
end)
return 1
