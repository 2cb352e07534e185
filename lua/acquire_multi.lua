-- acquire_multi.lua: take every lock key of a multi-key lock on this node, or none of them,
-- and mint one fencing token per key from that key's own fence counter.
--
-- KEYS     pairs: KEYS[2i-1] is the i-th lock key, KEYS[2i] its fence counter key (same
--          cluster hash slot); on a Redis Cluster node every key is in one slot
-- ARGV[1]  the holder id (random, 128 bits, hex)
-- ARGV[2]  the lock keys' TTL in milliseconds
-- ARGV[3]  the seed for a missing counter: the acquiring client's clock in microseconds
-- ARGV[4]  the counters' idle TTL in milliseconds; "0" creates counters without expiry and
--          leaves the expiry of existing ones as they are
-- ARGV[5]  "1" to mint tokens; "0" for a lock without fencing: the counters are not
--          touched and every token returned is 1
--
-- Returns {1, token_1, ..., token_n} when every key was taken (each token >= 1), and
-- {0, left, i} when some key is held by another holder: left is the largest remaining TTL in
-- milliseconds among the keys held by others (0 when one has no expiry), and i the position
-- (1-based) of the key with that TTL. Then nothing was changed: no key was set and no counter moved. Every key is checked before any is set, and
-- the script runs atomically, so a node never holds part of the set for us.
-- A resend of the same acquire (go-redis lost the reply) finds our keys and returns their
-- counters unchanged, as acquire.lua does for one key.
local n = #KEYS / 2
local left, held = -1, 0
for i = 1, n do
  local holder = redis.call('GET', KEYS[2 * i - 1])
  if holder and holder ~= ARGV[1] then
    local ms = redis.call('PTTL', KEYS[2 * i - 1])
    if ms < 0 then
      ms = 0
    end
    if ms > left then
      left, held = ms, i
    end
  end
end
if left >= 0 then
  return {0, left, held}
end

-- The same counter rules as acquire.lua: a counter that INCR creates (value 1) was missing
-- and is seeded from the clock instead.
local function mint(fence)
  if ARGV[5] ~= '1' then
    return 1
  end
  local token = redis.call('INCR', fence)
  if token == 1 then
    if ARGV[4] ~= '0' then
      redis.call('SET', fence, ARGV[3], 'PX', ARGV[4])
    else
      redis.call('SET', fence, ARGV[3])
    end
    return tonumber(ARGV[3])
  end
  if ARGV[4] ~= '0' then
    redis.call('PEXPIRE', fence, ARGV[4])
  end
  return token
end

local out = {1}
for i = 1, n do
  local lock, fence = KEYS[2 * i - 1], KEYS[2 * i]
  if redis.call('SET', lock, ARGV[1], 'NX', 'PX', ARGV[2]) then
    out[i + 1] = mint(fence)
  else
    -- Ours already (a resend): return the counter it minted, or mint if it was evicted.
    local mine = ARGV[5] == '1' and redis.call('GET', fence)
    if mine then
      out[i + 1] = tonumber(mine)
    else
      out[i + 1] = mint(fence)
    end
  end
end
return out
