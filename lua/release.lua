-- release.lua: compare-and-delete. Delete the lock key only if it still holds our id, and
-- then announce the release to waiters in other processes. scripts.go sends it behind
-- release_fast.lua, which does all of this inline when nobody is queued for the key.
--
-- KEYS[1]  the lock key
-- KEYS[2]  optional, with KEYS[3]: the key's waiter queue (queue.lua)
-- KEYS[3]  the queue's waiters hash
-- ARGV[1]  the holder id
-- ARGV[2]  optional: the wake-up channel of the key (wakeChannel in wake.go); absent or
--          empty for no announcement (the undo of a failed acquire, WithoutWakeups)
-- With the queue:
-- ARGV[3]  the turn channel prefix: the head of the queue is told on ARGV[3] .. head; empty
--          to tell nobody (the undo)
-- ARGV[4]  the releasing Client's id
-- ARGV[5]  its ticket when it has another Acquire waiting for the key (queued with it), or
--          "0" (it leaves the queue)
-- ARGV[6]  how long that place stays without a refresh, in milliseconds
--
-- Returns 1 when our key was deleted, 2 when it was deleted and the releasing Client's next
-- waiter may take the key now (it is the head of the queue, or nobody is queued), 0 when the
-- key is absent or belongs to another holder; the Client's place in the queue is then brought
-- in line with the other nodes' all the same (qelsewhere), and the reply is 3 instead of 0
-- when the key is free here and the Client, still queued, is the head: its next waiter's turn
-- (a release's or an undo's where our key is not: nothing was deleted). The fence
-- counter is never touched. The PUBLISH goes through redis.pcall (and the queue's work
-- through pcall), so a user whose ACL forbids the command or the channel still releases:
-- the error is dropped and the reply is 1 all the same. The message carries the released
-- holder id, so that a subscriber hearing one release from several nodes counts it once.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  local n = redis.call('DEL', KEYS[1])
  if ARGV[2] and ARGV[2] ~= '' then
    redis.pcall('PUBLISH', ARGV[2], ARGV[1])
  end
  if KEYS[3] then
    local ok, mine = pcall(qhandoff, KEYS[2], KEYS[3], KEYS[1], ARGV[1], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
    if ok and mine then
      return 2
    end
  end
  return n
end
if KEYS[3] then
  local ok, turn = pcall(qelsewhere, KEYS[2], KEYS[3], KEYS[1], ARGV[1], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
  if ok and turn then
    return 3
  end
end
return 0
