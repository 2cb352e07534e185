-- acquire_multi.lua: take every lock key of a multi-key lock on this node, or none of them,
-- and mint one fencing token per key (counters.lua, put in front of this file, has the
-- counter rules).
--
-- KEYS     triples: KEYS[3i-2] is the i-th lock key, KEYS[3i-1] its own fence counter (the
--          layout's), KEYS[3i] the other layout's counter (all in the key's slot); on a Redis
--          Cluster node every key is in one slot
-- ARGV[1]  the holder id (random, 128 bits, hex)
-- ARGV[2]  the lock keys' PX in milliseconds
-- ARGV[3]  the seed: the acquiring client's clock in microseconds
-- ARGV[4]  the counters' idle TTL in milliseconds; "0" creates counters without expiry and
--          leaves the expiry of existing ones as they are
-- ARGV[5]  "1" to mint tokens; "0" for a lock without fencing: the counters are not
--          touched and every token returned is 1
-- ARGV[6]  "1" for the slot layout, "0" for the per-key layout
--
-- Returns {1, token_1, ..., token_n} when every key was taken (each token >= 1), and
-- {0, left, i} when some key is held by another holder: left is the largest remaining TTL in
-- milliseconds among the keys held by others (0 when one has no expiry), and i the position
-- (1-based) of the key with that TTL. Then nothing was changed: no key was set and no
-- counter moved. Every key is checked before any is set, and the script runs atomically, so
-- a node never holds part of the set for us. Keys that share a slot counter mint from it in
-- KEYS order, so each gets its own token. A resend of the same acquire (go-redis lost the
-- reply) finds our keys and returns their own counters, as acquire.lua does for one key.
local n = #KEYS / 3
local left, held = -1, 0
for i = 1, n do
  local holder = redis.call('GET', KEYS[3 * i - 2])
  if holder and holder ~= ARGV[1] then
    local ms = redis.call('PTTL', KEYS[3 * i - 2])
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

local fenced, slot, seed = ARGV[5] == '1', ARGV[6] == '1', tonumber(ARGV[3])
local out = {1}
for i = 1, n do
  local lock, own, other = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  local taken = redis.call('SET', lock, ARGV[1], 'NX', 'PX', ARGV[2])
  if not fenced then
    out[i + 1] = 1
  else
    local mine = not taken and counter(own)
    if mine then
      -- Ours already (a resend): return the counter as it is.
      mirror(other, mine, slot)
      out[i + 1] = mine
    else
      out[i + 1] = mint(own, other, seed, ARGV[4], slot)
    end
  end
end
return out
