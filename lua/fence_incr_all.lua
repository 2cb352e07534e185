-- fence_incr_all.lua: several fenced increments, all admitted and applied or none. Each data
-- key has its own fencing token and its own token key (as in fence_write.lua); the write is
-- admitted only if every token is at least the highest admitted before for its key. Used for a
-- transfer under a multi-key lock, so that a holder whose lock on one account was taken over
-- cannot move money out of the other.
--
-- KEYS     pairs: KEYS[2i-1] the i-th data key, KEYS[2i] its token key (all in one cluster
--          hash slot on a Redis Cluster)
-- ARGV     pairs: ARGV[2i-1] the i-th token (decimal, 1 to 2^64-1), ARGV[2i] its increment
--          (decimal int64)
--
-- Returns {1, v_1, ..., v_n}, the new values in decimal (strings, read back with GET: an
-- integer reply reaches Lua as a double, inexact above 2^53), when every write was admitted
-- and applied;
-- {0, i, highest} when the i-th token is below the highest admitted for its key (nothing is
-- written). An increment that fails (WRONGTYPE, a value that is not an integer, an overflow)
-- undoes the ones before it, inside this atomic script, and then fails the script: nothing is
-- changed and no command ran in between.
local n = #KEYS / 2
local highest = {}
for i = 1, n do
  highest[i] = redis.call('GET', KEYS[2 * i])
  if highest[i] and not is_token(highest[i]) then
    return redis.error_reply('ERR fence: the token key of ' .. KEYS[2 * i - 1] .. ' holds something other than a token')
  end
  if highest[i] and below(ARGV[2 * i - 1], highest[i]) then
    return {0, i, highest[i]}
  end
end
local out = {1}
local existed = {}
for i = 1, n do
  existed[i] = redis.call('EXISTS', KEYS[2 * i - 1]) == 1
  local ok = redis.pcall('INCRBY', KEYS[2 * i - 1], ARGV[2 * i])
  if type(ok) == 'table' and ok.err then
    for j = i - 1, 1, -1 do
      if existed[j] then
        redis.call('DECRBY', KEYS[2 * j - 1], ARGV[2 * j])
      else
        redis.call('DEL', KEYS[2 * j - 1])
      end
    end
    return redis.error_reply('ERR fence_incr_all: key ' .. i .. ': ' .. ok.err)
  end
end
for i = 1, n do
  out[i + 1] = redis.call('GET', KEYS[2 * i - 1])
end
for i = 1, n do
  if highest[i] ~= ARGV[2 * i - 1] then
    redis.call('SET', KEYS[2 * i], ARGV[2 * i - 1])
  end
end
return out
