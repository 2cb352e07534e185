-- acquire.lua: take the lock on this node if it is free, and mint a fencing token
-- (counters.lua, put in front of this file, has the counter rules; queue.lua the waiter
-- queue; acquire_fast.lua, in front of all three, the usual case written out inline).
--
-- KEYS[1]  the lock key
-- KEYS[2]  the own fence counter (the layout's: slot counter or per-key counter)
-- KEYS[3]  the other layout's counter; all three in one cluster hash slot
-- KEYS[4]  optional, with KEYS[5]: the key's waiter queue (queue.lua); given by an Acquire
--          that waits its turn, absent for TryAcquire and clients without wake-ups
-- KEYS[5]  the queue's waiters hash
-- ARGV[1]  the holder id (random, 128 bits, hex)
-- ARGV[2]  the lock key's PX in milliseconds (TTL plus lock-delay)
-- ARGV[3]  the seed: the acquiring client's clock in microseconds
-- ARGV[4]  the counter's idle TTL in milliseconds; "0" creates a counter without expiry and
--          leaves the expiry of an existing one as it is
-- ARGV[5]  "1" for the slot layout, "0" for the per-key layout
-- With the queue:
-- ARGV[6]  the waiting Client's id (its member in the queue)
-- ARGV[7]  its ticket (microseconds)
-- ARGV[8]  how long its place stays without a refresh, in milliseconds
-- ARGV[9]  the grace, in milliseconds, after which a free key's head loses its turn
-- ARGV[10] "1" to mint a token, "0" for a lock without fencing (the counters are not
--          touched and the reply is 1)
-- ARGV[11] the turn channel prefix, on which the next waiter is told its turn when a
--          head that did not come within the grace loses it
--
-- Returns the token (>= 1) when the lock was taken. Without the queue, returns minus the
-- remaining milliseconds of the current holder's key (<= 0) when the key is held by another
-- holder; then nothing changed. With the queue, a refusal is -(left * 65536 + rank): left
-- those milliseconds (0 when the key is free but it is not this waiter's turn) and rank the
-- waiter's place in the queue (0 for the head, at most 65535); then only the queue changed.
-- A token is returned in decimal (a bulk string: tokens may exceed 2^53, where Lua's numbers
-- lose integers). A resend (go-redis lost the reply) finds our key and returns the own
-- counter as it is now: the token it minted, or for the slot layout possibly more, since
-- other keys of the slot move that counter; either is at least the token it minted.
-- An error reply (a bad argument, a counter at 2^63 - 1 or holding something other than a
-- counter, a seed to be written that is more than 10 s ahead of this node's clock) changes
-- nothing: everything is checked before the first write (counters.lua), but for the SET NX
-- of the uncontended path, which a failed check deletes again before the reply.
local queued = KEYS[5] ~= nil
local fenced = not queued or ARGV[10] == '1'
local slot = ARGV[5] == '1'

-- The keys' PX is checked first, once, for every path: the SET NX below needs it.
local _, perr = checked(argument, ARGV[2], 'the keys\' PX', true)
if perr then
  return perr
end

-- check reads and checks what this acquire would write (the PX aside), and returns the
-- token when the key is ours or free (nil when another holder has it, or without fencing).
local function check(holder)
  if not fenced or (holder and holder ~= ARGV[1]) then
    return nil
  end
  local seed = argument(ARGV[3], 'the seed', true)
  local idle = argument(ARGV[4], 'the counters\' idle TTL', false)
  if holder then
    -- Ours already: a resend, or our key with its counter gone (evicted), minted again.
    local mine = counter(KEYS[2])
    if mine then
      mirror(KEYS[3], mine, slot)
      return mine
    end
  end
  return mint(KEYS[2], KEYS[3], seed, idle, slot)
end

-- The uncontended path: nobody is queued for the key (or the acquire is not queued). SET NX
-- both tests that the key is free and takes it, saving a read; the checks follow, and a check
-- that fails deletes the key again before the error reply, so the script changes nothing
-- all the same (it is atomic: no other command sees the key in between). tried (set by
-- acquire_fast.lua in front of this file, false elsewhere) says that this has been done
-- already and SET NX refused, or that waiters are queued.
local nobody = not queued and not tried
if queued and not tried then
  local n = redis.pcall('EXISTS', KEYS[4]) -- a user without the queue's commands: no queue
  nobody = n == 0 or type(n) == 'table'
end
if nobody then
  if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    local token, err = checked(check, nil)
    if err then
      redis.call('DEL', KEYS[1]) -- set just above: the failed acquire leaves nothing
      return err
    end
    if not fenced then
      return 1
    end
    commit()
    return token
  end
  -- Held, by another holder or by us (a resend): as below.
end

local holder = redis.call('GET', KEYS[1])
local token, err = checked(check, holder)
if err then
  return err
end
if holder == ARGV[1] then
  if not fenced then
    return 1
  end
  commit()
  return token
end
local scale = 1
if queued then
  scale = 65536
  local ok, pass, rank, absent = pcall(qgate, holder, KEYS[4], KEYS[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9],
    KEYS[1], ARGV[1], ARGV[11])
  queued = not (ok and absent) -- nobody queued here: nothing for qtaken to do
  if ok and not pass then
    local left = 0
    if holder then
      left = math.max(redis.call('PTTL', KEYS[1]), 0)
    end
    return -(left * scale + math.min(rank, 65535))
  end
end
if holder then
  local left = redis.call('PTTL', KEYS[1])
  if left < 0 then
    left = 0
  end
  return -left * scale
end
-- Free (read above, and the script is atomic): SET NX takes it.
redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
if queued then
  pcall(qtaken, KEYS[4], KEYS[5], ARGV[6])
end
if not fenced then
  return 1
end
commit()
return token
