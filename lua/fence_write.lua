-- fence_write.lua: a fenced write. Admit it only if its fencing token is at least the highest
-- token admitted before for the data key; then write the data and record the token. The check
-- and the write happen inside this one script, so no other command runs between them.
--
-- KEYS[1]  the data key
-- KEYS[2]  its token key, "redlock:highest:" + the data key (wrapped in {} when it has no hash
--          tag), in the same cluster hash slot as KEYS[1]; holds the highest admitted token
-- ARGV[1]  the write's fencing token: a decimal integer from 1 to 2^64-1, no leading zeros
-- ARGV[2]  the operation: "set", "hset" or "incrby"
-- ARGV[3…] the operation's arguments:
--            set     ARGV[3] is the value (SET KEYS[1] ARGV[3])
--            hset    ARGV[3], ARGV[4], … are field, value pairs (HSET KEYS[1] …)
--            incrby  ARGV[3] is the increment, a decimal int64 (INCRBY KEYS[1] ARGV[3])
--
-- Returns {1, result} when the write was admitted: result is the new value for incrby, in
-- decimal (a string: Lua's numbers are doubles, which cannot hold every int64 above 2^53, so
-- INCRBY's integer reply is not returned as it reaches Lua), 0 for set and hset. Returns {0, highest} when it was refused because the token key holds a higher
-- token (highest, as a decimal string); nothing is written then.
-- The data is written before the token, so a data write that fails (WRONGTYPE, an increment on
-- a value that is not an integer, an overflow) aborts the script with nothing changed.
-- Tokens are compared with fence_tokens.lua's below, which redisfence.go puts in front of this
-- file.

local token = ARGV[1]
local highest = redis.call('GET', KEYS[2])
if highest and not is_token(highest) then
  return redis.error_reply('ERR fence: the token key of ' .. KEYS[1] .. ' holds something other than a token')
end
if highest and below(token, highest) then
  return {0, highest}
end

local op = ARGV[2]
local result = 0
if op == 'set' then
  redis.call('SET', KEYS[1], ARGV[3])
elseif op == 'hset' then
  redis.call('HSET', KEYS[1], unpack(ARGV, 3))
elseif op == 'incrby' then
  redis.call('INCRBY', KEYS[1], ARGV[3])
  result = redis.call('GET', KEYS[1])
else
  return redis.error_reply('ERR fence_write: unknown operation ' .. tostring(op))
end
if highest ~= token then
  redis.call('SET', KEYS[2], token)
end
return {1, result}
