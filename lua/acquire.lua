-- acquire.lua: take the lock on this node if it is free, and mint a fencing token
-- (counters.lua, put in front of this file, has the counter rules).
--
-- KEYS[1]  the lock key
-- KEYS[2]  the own fence counter (the layout's: slot counter or per-key counter)
-- KEYS[3]  the other layout's counter; all three in one cluster hash slot
-- ARGV[1]  the holder id (random, 128 bits, hex)
-- ARGV[2]  the lock key's PX in milliseconds (TTL plus lock-delay)
-- ARGV[3]  the seed: the acquiring client's clock in microseconds
-- ARGV[4]  the counter's idle TTL in milliseconds; "0" creates a counter without expiry and
--          leaves the expiry of an existing one as it is
-- ARGV[5]  "1" for the slot layout, "0" for the per-key layout
--
-- Returns the token (>= 1) when the lock was taken. Returns minus the remaining
-- milliseconds of the current holder's key (<= 0) when the key is held by another holder;
-- then nothing changed. A resend (go-redis lost the reply) finds our key and returns the
-- own counter as it is now: the token it minted, or for the slot layout possibly more, since
-- other keys of the slot move that counter; either is at least the token it minted.
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    local left = redis.call('PTTL', KEYS[1])
    if left < 0 then
      left = 0
    end
    return -left
  end
  local mine = counter(KEYS[2])
  if mine then
    mirror(KEYS[3], mine, ARGV[5] == '1')
    return mine
  end
  -- Our key is here but the counter is gone (evicted): mint as for a new counter.
end
return mint(KEYS[2], KEYS[3], tonumber(ARGV[3]), ARGV[4], ARGV[5] == '1')
