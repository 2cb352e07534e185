-- raise.lua: the slow path of acquire. Lift this node's fence counter to the token the
-- client chose, but only while the client's own key is still present here (counters.lua, put
-- in front of this file, has the counter rules).
--
-- KEYS[1]  the lock key
-- KEYS[2]  the own fence counter (the layout's)
-- KEYS[3]  the other layout's counter; all three in one cluster hash slot
-- ARGV[1]  the holder id
-- ARGV[2]  the target token
-- ARGV[3]  the counter's idle TTL in milliseconds, "0" to keep the expiry it has
-- ARGV[4]  "1" for the slot layout, "0" for the per-key layout
--
-- Returns 1 when the own counter is now at least the target, 0 when the key is not ours
-- (nothing is touched). A counter below the target (or missing) is set to it; one already at
-- or above it stays (with the slot layout, acquires of other keys of the slot may have moved
-- it past our target since our acquire here: docs/design.md §5.11 shows this is safe, since
-- the proof needs only that the counter is at least the token while our key is here). The
-- slot layout mirrors the target into an existing per-key counter either way. An error reply
-- (a bad target, a counter holding something other than a counter) changes nothing.
-- check returns 0 when the key is not ours, else 1 with the counters noted for commit.
local function check()
  local target = argument(ARGV[2], 'the target', true)
  local idle = argument(ARGV[3], 'the counter\'s idle TTL', false)
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
  end
  local current = counter(KEYS[2])
  if not current or dlt(current, target) then
    put(KEYS[2], target, idle)
  end
  mirror(KEYS[3], target, ARGV[4] == '1')
  return 1
end

local r, err = checked(check)
if err then
  return err
end
if r == 1 then
  commit()
end
return r
