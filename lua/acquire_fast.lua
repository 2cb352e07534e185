-- acquire_fast.lua: acquire.lua's usual paths with small numbers, written out inline.
-- scripts.go puts this file in front of acquire.lua, and acquire.lua (with counters.lua and
-- queue.lua) inside a function, general(tried), that runs only when this path does not apply.
-- KEYS and ARGV are acquire.lua's.
--
-- Why: a script's top-level code runs on every call, and counters.lua's rules (closures,
-- tables, pcall, exact decimal arithmetic on strings) cost about as much Lua time as the
-- Redis commands of the whole acquire (measured with redis-benchmark on one redis-server
-- 7.0.15, docs/performance.md). The usual acquire takes a free key whose counters and
-- arguments are plain decimals below 9 * 10^15 (today's clocks in microseconds are), which
-- Lua's numbers hold exactly, with nobody queued for the key or, for a queued acquire, with
-- its waiter at the head of the key's queue and alive (a hot key's handoff: the head that was
-- told its turn). For these this file does the same reads, checks and writes as acquire.lua
-- would and returns the same reply; only the order of its reads differs, and the node's clock
-- is read once where acquire.lua reads it for the seed bound and again for the queue (one
-- script, so the same time but for the microseconds the script takes).
--
-- With a queue there, the key is looked at first (EXISTS): a waiter's poll of a held key goes
-- to general at the cost of one command, without reading the queue twice.
--
-- Everything else goes to general: a key that is held, or waiters queued with another one
-- at the head or a head whose liveness ran out (tried is then true: the queue was read and
-- SET NX refused or not tried, so general starts at the holder's read); an argument or a
-- counter that is not such a decimal, or a seed past the clock bound (tried false, after this
-- file has deleted the key it set, the only write it has made: general then runs on the node
-- as it was, and gives the error reply). The queue is written only once every check has
-- passed. TestAcquireFastMatchesGeneral runs both on the same states and compares replies
-- and keys.

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

-- ahead reports whether the waiter this queued acquire is for (ARGV[6]) is the head of the key's
-- queue on this node and still alive there, as queue.lua's qhead would find it without taking
-- anybody out, and returns the node's clock (TIME, in microseconds) with it. A head whose
-- liveness ran out, another waiter at the head, a command refused or a key of another type:
-- false, and general decides (qgate).
local function ahead()
  local h = redis.pcall('ZRANGE', KEYS[4], 0, 0)
  if type(h) ~= 'table' or h.err or h[1] ~= ARGV[6] then
    return false
  end
  local t = redis.pcall('TIME')
  local alive = redis.pcall('HGET', KEYS[5], ARGV[6])
  if type(t) ~= 'table' or t.err or type(alive) ~= 'string' then
    return false
  end
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local a = tonumber(alive)
  -- qhead's test, as it is written there: a liveness of "nan" (which tonumber reads) is not
  -- alive, so not a < now but not (a >= now).
  if not (a and a >= tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)) then
    return false
  end
  return true, us
end

-- taken is queue.lua's qtaken for a queue known to be there: the head that took the key
-- leaves the queue (the queue goes with its hash when it was the last), and the free period
-- ends. It runs under pcall, as qtaken does: a user whose ACL lacks one of these commands
-- still gets the lock (what the queue's work did before the refusal stays, as there).
local function taken()
  redis.call('ZREM', KEYS[4], ARGV[6])
  if redis.call('ZCARD', KEYS[4]) == 0 then
    redis.call('DEL', KEYS[4], KEYS[5])
  else
    redis.call('HDEL', KEYS[5], ARGV[6])
  end
  redis.call('HDEL', KEYS[5], '')
end

local tried = false
if plain(ARGV[2]) then
  local nobody = KEYS[5] == nil
  local head, clock = false, nil -- queued: this waiter is the head, and the node's clock
  if not nobody then
    local n = redis.pcall('EXISTS', KEYS[4]) -- as acquire.lua: an error means no queue
    nobody = n == 0 or type(n) == 'table'
    if not nobody and redis.pcall('EXISTS', KEYS[1]) == 0 then -- a waiter's poll of a held key: general
      head, clock = ahead()
    end
  end
  tried = true
  if (nobody or head) and redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    tried = false
    if KEYS[5] ~= nil and ARGV[10] ~= '1' then
      if head then
        pcall(taken)
      end
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
          if not clock then
            local now = redis.pcall('TIME') -- counters.lua's bound
            if type(now) == 'table' and not now.err then
              clock = tonumber(now[1]) * 1000000 + tonumber(now[2])
            end
          end
          if clock then
            ok = tonumber(seed) - clock <= 10 * 1000000
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
          if head then
            pcall(taken)
          end
          return t
        end
      end
    end
    redis.call('DEL', KEYS[1]) -- set just above: general starts from the node as it was
  end
end
