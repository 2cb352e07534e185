-- counters.lua: the fence-counter rules, shared by acquire.lua, acquire_multi.lua, raise.lua
-- and heal.lua (scripts.go puts this file in front of each of them).
--
-- A lock key's tokens come from two counters on a node, both in the key's cluster hash slot
-- (docs/design.md §2, §5.11):
--   own    the counter this client's layout writes: the slot counter (shared by every key of
--          the slot, the default layout) or the key's own counter (the per-key layout, and
--          every client before the slot layout existed);
--   other  the counter of the other layout, read so that a key whose tokens came from it
--          (before an upgrade, or from a client of the other layout) never gets a token at or
--          below one it issued.
-- Both only ever grow. A slot-layout client also keeps an existing per-key counter at its
-- tokens (mirror), because clients of earlier versions read and INCR only that one.

local function counter(name)
  local v = redis.call('GET', name)
  if v then
    return tonumber(v)
  end
  return nil
end

-- store writes a counter with its idle TTL; an idle TTL of "0" keeps the expiry the counter
-- had (none for a new one). Numbers are written in full: Lua would print 1.8e15 as "1.8e+15".
local function store(name, value, idle)
  local s = string.format('%.0f', value)
  if idle ~= '0' then
    redis.call('SET', name, s, 'PX', idle)
  else
    redis.call('SET', name, s, 'KEEPTTL')
  end
end

-- mirror lifts the other (per-key) counter to value if it exists and is below it, keeping
-- its expiry: only for the slot layout.
local function mirror(other, value, slot)
  if not slot then
    return
  end
  local o = counter(other)
  if o and o < value then
    redis.call('SET', other, string.format('%.0f', value), 'KEEPTTL')
  end
end

-- mint returns the token of a key whose lock this script has just taken, and records it:
-- one more than the larger of the two counters, and at least the seed (the acquiring
-- client's clock in microseconds) when the own counter is missing or, for the slot layout,
-- always.
local function mint(own, other, seed, idle, slot)
  local c, o = counter(own), counter(other)
  local t = 0
  if c then
    t = c + 1
  end
  if o and o + 1 > t then
    t = o + 1
  end
  if (slot or not c) and seed > t then
    t = seed
  end
  store(own, t, idle)
  if slot and o then -- the mirror, with the value already read
    redis.call('SET', other, string.format('%.0f', t), 'KEEPTTL')
  end
  return t
end
