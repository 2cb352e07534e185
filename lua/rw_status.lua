-- rw_status.lua: read what this node knows about a read/write lock, atomically, changing
-- nothing (rwstatus.go). status.lua's body is defined in front of this script as
-- status_body() (scripts.go) and reads the writer key as status reads a lock key.
--
-- KEYS[1..4]  as status.lua's: the writer key, its own and its other fence counter, its
--             waiter queue, all in one cluster hash slot
-- KEYS[5]     the readers: a sorted set, reader id -> expiry in ms on this node's clock
-- KEYS[6]     the writer intent (rw_gate.lua): a waiting writer's Client id, with a short PX
-- KEYS[7]     the reader phase (read_acquire.lua): the waiting readers by expiry, and "r"
--             (score: its end) while a read phase is open
-- ARGV[1]     the most readers to list
--
-- Returns status.lua's five values, then:
--   the number of readers whose place has not expired on this node's clock (score above
--   TIME in ms; an expired place lingers until a script of the lock removes it, and is not
--   counted), or -1 when the node refuses ZRANGE (an ACL user without the read/write
--   lock's commands);
--   the intent's value or "", and its remaining ms (-2 when absent);
--   the reader phase: "r" while a read phase is open (its end unexpired and a reader it
--   waits for still marked), else "w" while readers are marked waiting, else ""; its
--   remaining ms (the phase's end, or the last mark's; -2 for ""); the readers marked;
--   then, for at most ARGV[1] of the counted readers, soonest to expire first, its id and
--   its remaining ms.
local out = status_body()
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local places = redis.pcall('ZRANGE', KEYS[5], 0, -1, 'WITHSCORES')
local listed, most = {}, tonumber(ARGV[1])
local count = -1
if type(places) == 'table' and places.err == nil then
  count = 0
  for i = 1, #places, 2 do
    local left = tonumber(places[i + 1]) - now
    if left > 0 then
      count = count + 1
      if count <= most then
        listed[#listed + 1] = places[i]
        listed[#listed + 1] = left
      end
    end
  end
end
out[#out + 1] = count
out[#out + 1] = redis.call('GET', KEYS[6]) or ''
out[#out + 1] = redis.call('PTTL', KEYS[6])
local marks = redis.pcall('ZRANGE', KEYS[7], 0, -1, 'WITHSCORES')
local phase, phaseLeft, waiting, ends = '', -2, 0, nil
if type(marks) == 'table' and marks.err == nil then
  for i = 1, #marks, 2 do
    local left = tonumber(marks[i + 1]) - now
    if left > 0 then
      if marks[i] == 'r' then
        ends = left
      else
        waiting = waiting + 1
        phaseLeft = math.max(phaseLeft, left)
      end
    end
  end
end
if waiting > 0 then
  phase = 'w'
  if ends then
    phase, phaseLeft = 'r', ends
  end
end
out[#out + 1] = phase
out[#out + 1] = phaseLeft
out[#out + 1] = waiting
for _, v in ipairs(listed) do
  out[#out + 1] = v
end
return out
