-- heal.lua: give back to a node that lost them (it restarted empty, or evicted them) the lock
-- keys of a lock that a quorum of other nodes has just confirmed, and lift its counters to at
-- least the lock's tokens. It never takes a key from another holder. counters.lua, put in
-- front of this file, has the counter rules.
--
-- KEYS     triples: KEYS[3i-2] is the i-th lock key, KEYS[3i-1] its own fence counter (the
--          layout's), KEYS[3i] the other layout's counter (all in the key's slot); a
--          single-key lock is the case of one triple
-- ARGV[1]  the holder id
-- ARGV[2]  the TTL for the keys set here, in milliseconds: at most the validity time the
--          lock has left (plus the lock-delay, if any)
-- ARGV[3]  the counters' idle TTL in milliseconds; "0" to keep the expiry they have
-- ARGV[4]  "1" to lift the counters, "0" for a lock without fencing (counters untouched)
-- ARGV[5]  the seed for a missing counter: the healing client's clock in microseconds
-- ARGV[6]  "1" for the slot layout, "0" for the per-key layout
-- ARGV[7…] the lock's token for each key, in KEYS order (when ARGV[4] is "1")
--
-- Returns 1 when every key now holds our id here (set by this script or still ours), 0 when
-- some key belongs to another holder: then nothing was changed. Keys that are still ours
-- keep their TTL. An own counter below the token is set to the token; a higher one stays. A
-- missing own counter (the node lost it) gets the larger of the seed and the token, as an
-- acquire would seed it from the clock: a token the node had issued before it lost its state
-- may be above ours, and the seed is what clears it (docs/design.md §5.6). An error reply (a
-- bad argument, a counter holding something other than a counter, a seed to be written that
-- is too far ahead of the node's clock) changes nothing: every key and counter is checked
-- before the first write.
local n = #KEYS / 3
local fenced, slot = ARGV[4] == '1', ARGV[6] == '1'

-- check returns 0 when some key is another holder's, else 1 with the counters noted for
-- commit.
local function check()
  argument(ARGV[2], 'the keys\' PX', true)
  local idle, seed
  local tokens = {}
  if fenced then
    idle = argument(ARGV[3], 'the counters\' idle TTL', false)
    seed = argument(ARGV[5], 'the seed', true)
    for i = 1, n do
      tokens[i] = argument(ARGV[6 + i], 'the token', true)
    end
  end
  for i = 1, n do
    local holder = redis.call('GET', KEYS[3 * i - 2])
    if holder and holder ~= ARGV[1] then
      return 0
    end
  end
  if fenced then
    for i = 1, n do
      local own, other = KEYS[3 * i - 1], KEYS[3 * i]
      local token = tokens[i]
      local current = counter(own)
      if not current and dlt(token, seed) then
        bound(seed)
        token = seed
      end
      if not current or dlt(current, token) then
        put(own, token, idle)
      end
      mirror(other, token, slot)
    end
  end
  return 1
end

local r, err = checked(check)
if err then
  return err
end
if r == 0 then
  return 0
end
for i = 1, n do
  redis.call('SET', KEYS[3 * i - 2], ARGV[1], 'NX', 'PX', ARGV[2])
end
commit()
return 1
