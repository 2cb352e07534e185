-- queue.lua: the waiter queue of one lock key on this node (docs/design.md §3.10), put in
-- front of acquire.lua, release.lua, release_multi.lua and leave.lua by scripts.go.
--
-- Two keys per lock key, both in the lock key's cluster hash slot:
--   queue    a sorted set: member a Client's id, score its ticket (that Client's clock in
--            microseconds when its oldest waiting Acquire of the key began). The Client
--            sends the same ticket to every node, so every node orders the same waiters the
--            same way (ties by member, as sorted sets do).
--   waiters  a hash: member -> the node time (ms) until which that waiter counts as alive,
--            refreshed by each of its attempts; field '' -> the node time (ms) since which the
--            key has been free while someone is queued.
-- A queue only ever refuses an acquire: it is a precondition in front of SET NX, never a way
-- to grant one, so the safety argument of design.md §5 does not depend on anything here.
-- The callers run these functions under Lua's pcall: a node that refuses one of the commands
-- (an ACL without them, say) behaves as if nobody were queued.

local function qnow()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- qjoin puts member in the queue with ticket, or refreshes it, alive for live ms from now.
local function qjoin(queue, waiters, member, ticket, live, now)
  redis.call('ZADD', queue, ticket, member)
  redis.call('HSET', waiters, member, now + tonumber(live))
  redis.call('PEXPIRE', queue, live)
  redis.call('PEXPIRE', waiters, live)
end

-- qleave takes member out of the queue; an empty queue is deleted with its hash. Returns 1
-- when member had a place, 0 when it had none.
local function qleave(queue, waiters, member)
  local n = redis.call('ZREM', queue, member)
  if redis.call('ZCARD', queue) == 0 then
    redis.call('DEL', queue, waiters)
  else
    redis.call('HDEL', waiters, member)
  end
  return n
end

-- qhead returns the head of the queue once the heads whose liveness ran out are taken out
-- (at most 16 per call, so that a script stays short; the rest go at later calls), or nil.
local function qhead(queue, waiters, now)
  for _ = 1, 16 do
    local h = redis.call('ZRANGE', queue, 0, 0)[1]
    if not h then
      return nil
    end
    local alive = tonumber(redis.call('HGET', waiters, h))
    if alive and alive >= now then
      return h
    end
    qleave(queue, waiters, h)
  end
  return redis.call('ZRANGE', queue, 0, 0)[1]
end

-- qtell tells head (the head of the queue, its first member) that its turn has come: a
-- message on prefix .. head carrying msg (a release's id .. key). A head that died does not
-- act on it, and nothing here happens then until some waiter's acquire finds the key free for
-- more than the grace and passes the turn on (qgate); the waiters' own pauses may have been
-- drawn long, when they were far back in the queue. So when nobody received the message (no
-- connection of the head's Client listens on its channel here: its process is gone, or its
-- connection to this node is), the waiter after it is told that its turn may come soon:
-- runnerUpMark .. msg on its channel, and it tries again just after the grace (wakehub.go,
-- soonFrom). If nobody receives that either, the one after it is told, and so on down the
-- queue until one hears it, at most 16 of them (as qhead, so that a script stays short). The
-- one told passes one dead waiter over per grace: when the next head is dead too, its turn is
-- unheard, and the same waiter is told again. A head that is alive and listening costs
-- nothing more: a turn's PUBLISH reports its receivers.
local function qtell(queue, prefix, head, msg)
  if redis.call('PUBLISH', prefix .. head, msg) > 0 then
    return
  end
  local next = redis.call('ZRANGE', queue, 1, 16)
  for i = 1, #next do
    if redis.call('PUBLISH', prefix .. next[i], '~' .. msg) > 0 then
      return
    end
  end
end

-- qgate decides whether member may take the lock key now, as far as the queue is concerned,
-- and queues it (or refreshes its place) when it may not. holder is the lock key's value
-- (nil when free). Returns true, or false and member's rank in the queue (0 is the head); a
-- third result true means nobody was queued, so there is nothing for qtaken to do.
-- A free key goes to the head; when it has stayed free for more than grace ms with the head
-- not taking it (a waiter that died, or one whose announcement was lost), the head is taken
-- out and the next one's turn begins: it is told on prefix .. head, with id .. key.
local function qgate(holder, queue, waiters, member, ticket, live, grace, key, id, prefix)
  if not holder and redis.call('EXISTS', queue) == 0 then
    return true, 0, true -- nobody waits: the common, uncontended case costs one EXISTS
  end
  local now = qnow()
  if not holder and qhead(queue, waiters, now) == member then
    return true -- the head's turn: it leaves the queue once it has the key (qtaken)
  end
  qjoin(queue, waiters, member, ticket, live, now)
  if holder then
    redis.call('HDEL', waiters, '') -- held: the next free period starts afresh
    qhead(queue, waiters, now)
    return false, redis.call('ZRANK', queue, member)
  end
  local head = qhead(queue, waiters, now)
  if head ~= member then
    local since = tonumber(redis.call('HGET', waiters, ''))
    if not since then
      redis.call('HSET', waiters, '', now)
    elseif now - since > tonumber(grace) then
      qleave(queue, waiters, head)
      redis.call('HSET', waiters, '', now)
      head = qhead(queue, waiters, now)
      if head and head ~= member then
        qtell(queue, prefix, head, id .. key)
      end
    end
  end
  if head == member then
    return true
  end
  return false, redis.call('ZRANK', queue, member)
end

-- qtaken is run once member has taken the lock key: it leaves the queue, and the free
-- period ends.
local function qtaken(queue, waiters, member)
  if redis.call('EXISTS', queue) == 1 then
    qleave(queue, waiters, member)
    redis.call('HDEL', waiters, '')
  end
end

-- qhandoff is run when the lock key has just been deleted by its holder. member is the
-- releasing Client: with ticket '0' it leaves the queue, with '' its place is kept as it is,
-- and with any other ticket (it has another Acquire waiting for the key) it is queued with
-- it. Then, when prefix is not empty, the head is told that its turn has come: a message on
-- prefix .. head carrying id .. key (qtell: if nobody hears it, the runner-up is told).
-- Returns true when member's own next waiter may take the key now (no message is sent then:
-- the caller wakes its own waiter): member is the head, or nobody is queued. In that last
-- case no queue is made for member's waiter: one Client handing a key from goroutine to
-- goroutine costs the node no queue at all.
local function qhandoff(queue, waiters, key, id, prefix, member, ticket, live)
  if redis.call('EXISTS', queue) == 0 then
    return prefix ~= '' and ticket ~= '0' and ticket ~= ''
  end
  local now = qnow()
  if ticket == '0' then
    qleave(queue, waiters, member)
  elseif ticket ~= '' then
    qjoin(queue, waiters, member, ticket, live, now)
  end
  if prefix == '' then
    return false
  end
  local head = qhead(queue, waiters, now)
  if not head then
    return false
  end
  redis.call('HSET', waiters, '', now)
  if head == member then
    return true
  end
  qtell(queue, prefix, head, id .. key)
  return false
end

-- qelsewhere is qhandoff's counterpart on a node where the releasing Client's key is not: its
-- acquire was refused here (the release before it had not come yet, say) or never written
-- here, while it won on a quorum elsewhere, or the key expired here. No qtaken took the
-- Client's place out here, so the release brings that place to what it is on the other
-- nodes: gone with ticket '0', moved with any other ticket; with '', nothing changes, and with
-- the ticket it has already (an undo's) only the turn below is looked at. When the place was
-- the head and the key is free here, the next waiter is told its turn, with id .. key as the
-- nodes where the key was deleted tell it. Without this, the place stayed at the head until
-- its liveness ran out or a later attempt found the grace passed, and each acquire in the
-- meantime was refused here. Returns true when the Client stays queued here and is the head
-- of the free key: its next waiter's turn has come here, and nobody else is told (the caller
-- replies 3, so that the Client counts it as qhandoff's 2).
local function qelsewhere(queue, waiters, key, id, prefix, member, ticket, live)
  if ticket == '' then
    return false
  end
  local head = redis.call('ZRANGE', queue, 0, 0)[1]
  if not head then
    return false -- no queue here
  end
  local now
  if ticket == '0' then
    if qleave(queue, waiters, member) == 0 then
      return false
    end
  elseif redis.call('ZADD', queue, 'XX', 'CH', ticket, member) == 1 then
    now = qnow()
    qjoin(queue, waiters, member, ticket, live, now)
  end
  if prefix == '' or redis.call('EXISTS', key) == 1 then
    return false
  end
  now = now or qnow()
  local next = qhead(queue, waiters, now)
  if next and next == member then
    return true
  end
  if next and head == member then
    redis.call('HSET', waiters, '', now)
    qtell(queue, prefix, next, id .. key)
  end
  return false
end
