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
-- Returns {1, token_1, ..., token_n} when every key was taken (each token >= 1, in decimal:
-- a bulk string, as acquire.lua returns it), and
-- {0, left, i} when some key is held by another holder: left is the largest remaining TTL in
-- milliseconds among the keys held by others (0 when one has no expiry), and i the position
-- (1-based) of the key with that TTL. Then nothing was changed: no key was set and no
-- counter moved. Every key is checked before any is set, and the script runs atomically, so
-- a node never holds part of the set for us. Keys that share a slot counter mint from it in
-- KEYS order, so each gets its own token. A resend of the same acquire (go-redis lost the
-- reply) finds our keys and returns their own counters, as acquire.lua does for one key.
-- Every token is computed and checked before the first key is set, so an error reply (a
-- counter at 2^63 - 1 or holding something else, a seed to be written that is too far ahead
-- of the node's clock, a bad argument) leaves nothing behind.
local n = #KEYS / 3
local fenced, slot = ARGV[5] == '1', ARGV[6] == '1'

-- check reads every key and counter and returns the reply: {0, left, i} when a key is held,
-- else {1, token...} with every token noted for commit (keys of one slot share the slot
-- counter and mint from it in KEYS order).
local function check()
  argument(ARGV[2], 'the keys\' PX', true)
  local holders = {}
  local left, held = -1, 0
  for i = 1, n do
    local holder = redis.call('GET', KEYS[3 * i - 2])
    holders[i] = holder
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
  local out = {1}
  if not fenced then
    for i = 1, n do
      out[i + 1] = 1
    end
    return out
  end
  local seed = argument(ARGV[3], 'the seed', true)
  local idle = argument(ARGV[4], 'the counters\' idle TTL', false)
  for i = 1, n do
    local own, other = KEYS[3 * i - 1], KEYS[3 * i]
    local mine = holders[i] == ARGV[1] and counter(own)
    if mine then
      -- Ours already (a resend): return the counter as it is.
      mirror(other, mine, slot)
      out[i + 1] = mine
    else
      out[i + 1] = mint(own, other, seed, idle, slot)
    end
  end
  return out
end

local out, err = checked(check)
if err then
  return err
end
if out[1] == 0 then
  return out
end
for i = 1, n do
  redis.call('SET', KEYS[3 * i - 2], ARGV[1], 'NX', 'PX', ARGV[2])
end
commit()
return out
