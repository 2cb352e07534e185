-- acquire_fast.lua: acquire.lua's uncontended path with small numbers, written out inline.
-- scripts.go puts this file in front of acquire.lua, and acquire.lua (with counters.lua and
-- queue.lua) inside a function, general(tried), that runs only when this path does not apply.
-- KEYS and ARGV are acquire.lua's.
--
-- Why: a script's top-level code runs on every call, and counters.lua's rules (closures,
-- tables, pcall, exact decimal arithmetic on strings) cost about as much Lua time as the
-- Redis commands of the whole acquire (measured with redis-benchmark on one redis-server
-- 7.0.15, docs/performance.md). The usual acquire takes a free key whose counters and
-- arguments are plain decimals below 9 * 10^15 (today's clocks in microseconds are), which
-- Lua's numbers hold exactly; for it this file does the same reads, checks and writes as
-- acquire.lua would, in the same order, and returns the same reply.
--
-- Everything else goes to general: a key that is held or has waiters queued (tried is then
-- true: the queue was read and SET NX refused, so general starts at the holder's read); an
-- argument or a counter that is not such a decimal, or a seed past the clock bound (tried
-- false, after this file has deleted the key it set, the only write it has made: general then
-- runs on the node as it was, and gives the error reply). TestAcquireFastMatchesGeneral runs
-- both on the same states and compares replies and keys.

-- plain reports whether s is a decimal without sign or leading zeros below 9 * 10^15
-- (counters.lua's exact), "0" included only when zero is set.
local function plain(s, zero)
  if type(s) ~= 'string' or not (#s < 16 or (#s == 16 and string.byte(s) < 57)) then
    return false
  end
  if s == '0' then
    return zero
  end
  return string.find(s, '^[1-9][0-9]*$') ~= nil
end

local tried = false
if plain(ARGV[2]) then
  local nobody = KEYS[5] == nil
  if not nobody then
    local n = redis.pcall('EXISTS', KEYS[4]) -- as acquire.lua: an error means no queue
    nobody = n == 0 or type(n) == 'table'
  end
  tried = true
  if nobody and redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    tried = false
    if KEYS[5] ~= nil and ARGV[10] ~= '1' then
      return 1 -- queued without fencing: acquire.lua returns 1 without a check
    end
    local seed, idle, slot = ARGV[3], ARGV[4], ARGV[5] == '1'
    if plain(seed) and plain(idle, true) then
      -- pcall: a counter of another type is an error table here, which plain refuses, so
      -- general gives the error reply with the key deleted (redis.call would end the script
      -- with the key set).
      local c = redis.pcall('GET', KEYS[2])
      local o = redis.pcall('GET', KEYS[3])
      if (not c or plain(c, true)) and (not o or plain(o, true)) then
        local t
        if c then
          t = tonumber(c) + 1
        end
        if o and (not t or tonumber(o) + 1 > t) then
          t = tonumber(o) + 1
        end
        local ok = true
        if (slot or not c) and (not t or t < tonumber(seed)) then
          local now = redis.pcall('TIME') -- counters.lua's bound
          if type(now) == 'table' and not now.err then
            ok = tonumber(seed) - (tonumber(now[1]) * 1000000 + tonumber(now[2])) <= 10 * 1000000
          end
          t = seed
        else
          t = string.format('%.0f', t)
        end
        if ok then
          if idle ~= '0' then
            redis.call('SET', KEYS[2], t, 'PX', idle)
          else
            redis.call('SET', KEYS[2], t, 'KEEPTTL')
          end
          if slot and o then
            redis.call('SET', KEYS[3], t, 'KEEPTTL')
          end
          return t
        end
      end
    end
    redis.call('DEL', KEYS[1]) -- set just above: general starts from the node as it was
  end
end
