-- raise.lua: the slow path of acquire. Lift this node's fence counter to the token the
-- client chose, but only while the client's own key is still present here.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fence counter key (same cluster hash slot as KEYS[1])
-- ARGV[1]  the holder id
-- ARGV[2]  the target token
-- ARGV[3]  the counter's idle TTL in milliseconds, "0" for a counter that never expires
--
-- Returns 1 when the counter now equals the target, 0 when the key is not ours (the counter
-- is then untouched) and -1 when the counter is already above the target.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local current = redis.call('GET', KEYS[2])
local target = tonumber(ARGV[2])
if current and tonumber(current) > target then
  return -1
end
redis.call('SET', KEYS[2], ARGV[2])
if ARGV[3] ~= '0' then
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
return 1
