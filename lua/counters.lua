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
--
-- Exact values. Counters hold Redis integers, 0 to 2^63 - 1 (what INCR accepts), but Lua's
-- numbers are doubles, exact only up to 2^53: above it, one more than a counter can round
-- back to the counter itself. So a value is kept here as its decimal string, compared and
-- incremented by dlt and dinc, which use numbers only below 9 * 10^15 (exact) and strings
-- above. A counter at 2^63 - 1 mints no more tokens: the script refuses rather than wrap
-- (docs/design.md §5.12).
--
-- Check, then write. Redis keeps what a script wrote before it failed, so every script
-- reads and checks everything first (counters that hold something else, a counter at the
-- maximum, bad arguments), in one function run by checked, and returns an error reply,
-- having changed nothing, when a check fails. The counters it will write are only noted
-- (put) while it checks, and written by commit, after the checks. (acquire.lua's
-- uncontended path sets the lock key first and deletes it again when a check fails.)

local MAX = '9223372036854775807'

-- SEED_LEAD is how far, in seconds, a seed may be ahead of this node's clock when it is
-- written as a counter (docs/design.md §5.6, "Seeds from clocks far ahead").
local SEED_LEAD = 10

-- fail ends the checks of a script (see checked) with an error reply.
local function fail(msg)
  error({err = 'ERR redlock: ' .. msg})
end

-- checked runs f(...), the part of a script that reads and checks everything before the
-- first write, and returns its result; when a check failed, nil and the error reply that the
-- script then returns, having written nothing.
local function checked(f, ...)
  local ok, r = pcall(f, ...)
  if ok then
    return r
  end
  if type(r) ~= 'table' or not r.err then
    r = redis.error_reply(tostring(r))
  end
  return nil, r
end

-- short quotes at most 64 bytes of a name or value for an error message.
local function short(s)
  if #s > 64 then
    return string.format('%q', string.sub(s, 1, 64) .. '...')
  end
  return string.format('%q', s)
end

-- exact reports whether decimal a (as for dlt) is below 9 * 10^15, which is below 2^53: such
-- a value, and one more than it, are exact as Lua numbers. Today's clocks in microseconds
-- (16 digits, starting with 1) are, so the usual counters and seeds take the numeric paths.
local function exact(a)
  return #a < 16 or (#a == 16 and string.byte(a) < 57) -- 57 is '9'
end

-- dlt reports whether a < b, for decimal integers without sign or leading zeros of at most
-- 20 digits: the shorter is smaller; of equal lengths, below 9 * 10^15 as numbers, and
-- beyond it two halves of at most 10 digits each, which doubles hold exactly.
local function dlt(a, b)
  if #a ~= #b then
    return #a < #b
  end
  if exact(a) and exact(b) then
    return tonumber(a) < tonumber(b)
  end
  local ha, hb = tonumber(string.sub(a, 1, -11)), tonumber(string.sub(b, 1, -11))
  if ha ~= hb then
    return ha < hb
  end
  return tonumber(string.sub(a, -10)) < tonumber(string.sub(b, -10))
end

-- dinc returns a + 1 for such a decimal: as a number below 9 * 10^15 (exact), and beyond it
-- as a string, the trailing nines becoming zeros and the digit before them going up by one.
local function dinc(a)
  if exact(a) then
    return string.format('%.0f', tonumber(a) + 1)
  end
  local head, nines = string.match(a, '^(.-)(9*)$')
  local zeros = string.rep('0', #nines)
  if head == '' then
    return '1' .. zeros
  end
  return string.sub(head, 1, -2) .. string.char(string.byte(head, -1) + 1) .. zeros
end

-- decimal returns s if it is a decimal integer from 0 to MAX, without sign or leading
-- zeros, and nil otherwise.
local function decimal(s)
  if type(s) ~= 'string' or #s == 0 or #s > #MAX or not string.match(s, '^[0-9]+$') then
    return nil
  end
  if #s > 1 and string.sub(s, 1, 1) == '0' then
    return nil
  end
  if #s == #MAX and dlt(MAX, s) then
    return nil
  end
  return s
end

-- argument returns an ARGV value that must be such a decimal, at least 1 if positive is set,
-- or fails naming what it is.
local function argument(v, what, positive)
  local d = decimal(v)
  if not d or (positive and d == '0') then
    fail(what .. ' ' .. short(tostring(v)) .. ' is not an integer from ' .. (positive and '1' or '0') .. ' to ' .. MAX)
  end
  return d
end

-- The counters this script has read, by name: a decimal, or false when missing; after a put,
-- the value to be written. pending lists the names to write, in order, each once, with the
-- idle TTL of an own counter (nil for a mirror, which keeps the counter's expiry).
local values, pending, idles = {}, {}, {}

-- counter returns a counter's value (a decimal string) or nil when it is missing. A counter
-- that holds anything else ends the script: it was not written by these rules, and whatever
-- it was meant to hold, a token below it could repeat one.
local function counter(name)
  local v = values[name]
  if v == nil then
    local raw = redis.call('GET', name)
    v = false
    if raw then
      v = decimal(raw)
      if not v then
        fail('fence counter ' .. short(name) .. ' holds ' .. short(raw) ..
          ', not an integer from 0 to ' .. MAX .. '; nothing was changed')
      end
    end
    values[name] = v
  end
  return v or nil
end

-- put notes that counter name (read before by counter) is to become value: with the idle
-- TTL idle (an own counter; "0" keeps the expiry it had), or keeping its expiry (idle nil).
local function put(name, value, idle)
  if idles[name] == nil then
    pending[#pending + 1] = name
    idles[name] = false
  end
  values[name] = value
  if idle then
    idles[name] = idle
  end
end

-- commit writes every counter put so far, once the script has passed its last check.
local function commit()
  for _, name in ipairs(pending) do
    local idle = idles[name]
    if idle and idle ~= '0' then
      redis.call('SET', name, values[name], 'PX', idle)
    else
      redis.call('SET', name, values[name], 'KEEPTTL')
    end
  end
end

-- above returns one more than counter value v of counter name, or fails when v is at MAX.
local function above(v, name)
  if v == MAX then
    fail('fence counter ' .. short(name) .. ' is at ' .. MAX ..
      ', the largest integer Redis holds, and mints no more tokens; nothing was changed')
  end
  return dinc(v)
end

-- bound fails when seed, about to become a counter's value, is more than SEED_LEAD seconds
-- ahead of this node's clock: one client whose clock runs far ahead would otherwise lift a
-- slot's counters beyond every other client's clock, for good. It refuses rather than clamp,
-- so no seed is ever lowered. A node user without TIME (an ACL that lacks it) skips the bound.
local function bound(seed)
  local now = redis.pcall('TIME')
  if type(now) ~= 'table' or now.err then
    return
  end
  -- Microseconds ahead, as numbers: exact for seeds below 2^53 (today's clocks), and for
  -- larger ones far beyond the lead anyway; the bound needs no better than a microsecond.
  local ahead = tonumber(seed) - (tonumber(now[1]) * 1000000 + tonumber(now[2]))
  if ahead > SEED_LEAD * 1000000 then
    fail('seed ' .. seed .. ' (the acquiring client\'s clock in microseconds) is ' .. string.format('%.0f', ahead / 1000000) ..
      ' s ahead of this node\'s clock, more than ' .. SEED_LEAD .. ' s: check the clocks of the client and of the node; nothing was changed')
  end
end

-- mirror notes that the other (per-key) counter is lifted to value if it exists and is
-- below it, keeping its expiry: only for the slot layout.
local function mirror(other, value, slot)
  if not slot then
    return
  end
  local o = counter(other)
  if o and dlt(o, value) then
    put(other, value)
  end
end

-- mint returns the token of a key whose lock this script is about to take, and notes it for
-- commit: one more than the larger of the two counters, and at least the seed (the acquiring
-- client's clock in microseconds) when the own counter is missing or, for the slot layout,
-- always. It fails, before anything is written, when a counter is at MAX, or when the seed
-- would be written and is too far ahead of the node's clock (bound).
local function mint(own, other, seed, idle, slot)
  local c, o = counter(own), counter(other)
  local t
  if c then
    t = above(c, own)
  end
  if o then
    local n = above(o, other)
    if not t or dlt(t, n) then
      t = n
    end
  end
  if (slot or not c) and (not t or dlt(t, seed)) then
    bound(seed)
    t = seed
  end
  put(own, t, idle)
  if slot and o then -- the mirror, with the value already read
    put(other, t)
  end
  return t
end
