-- acquire.lua: take the lock on this node if it is free, and mint a fencing token.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fence counter key (same cluster hash slot as KEYS[1])
-- ARGV[1]  the holder id (random, 128 bits, hex)
-- ARGV[2]  the lock TTL in milliseconds
-- ARGV[3]  the seed for a missing counter: the acquiring client's clock in microseconds
-- ARGV[4]  the counter's idle TTL in milliseconds; "0" creates a counter without expiry and
--          leaves the expiry of an existing one as it is
--
-- Returns the counter value (>= 1) when the lock was taken. Returns minus the remaining
-- milliseconds of the current holder's key (<= 0) when the key is held by another holder.
-- The counter changes only when the lock was taken, so it never moves under another holder.
-- The script is idempotent: when a client library resends it after losing the reply, our
-- key is already there and the counter is returned unchanged (nobody else can move it
-- while our key is present).
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    local left = redis.call('PTTL', KEYS[1])
    if left < 0 then
      left = 0
    end
    return -left
  end
  -- A resend of our own acquire: our key is already here.
  local mine = redis.call('GET', KEYS[2])
  if mine then
    return tonumber(mine)
  end
  -- Our key is here but the counter is gone (evicted): mint as for a new counter.
end
-- INCR creates a missing counter at 1, a value no live counter has (seeds are >= 1 and
-- counters only grow from there), so 1 means "was missing": seed it instead, giving it its
-- idle TTL in the same SET. One call fewer than testing EXISTS first, and one fewer than
-- seeding and expiring apart.
local token = redis.call('INCR', KEYS[2])
if token == 1 then
  if ARGV[4] ~= '0' then
    redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
  else
    redis.call('SET', KEYS[2], ARGV[3])
  end
  return tonumber(ARGV[3])
end
if ARGV[4] ~= '0' then
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
end
return token
