-- release_fast.lua: release.lua when nobody is queued for the key, written out inline.
-- scripts.go puts this file in front of release.lua, and release.lua (with queue.lua in
-- front of it) inside a function, general(), that runs only when this path does not apply.
-- KEYS and ARGV are release.lua's.
--
-- Why: a script's top-level code runs on every call, and defining queue.lua's rules costs a
-- release about as much as its PUBLISH does (measured with the release's own arguments on one
-- redis-server 7.0.15, docs/performance.md). Most releases find nobody queued for the key; for
-- them this path does what release.lua would: the compare-and-delete, the announcement, and
-- qhandoff's first case (no queue), in which the reply is 2 when the releasing Client has
-- another Acquire waiting for the key (a ticket other than "0" and "", with a turn prefix),
-- and 1 otherwise.
--
-- The queue is read first, before the lock key: the script is atomic, so the order of its
-- reads changes nothing that another client can see. A node that has a queue for the key, or
-- that refuses EXISTS (an ACL without it: release.lua's pcall then drops the queue's work),
-- goes to general, on the node as it was: this path has written nothing by then.
-- TestReleaseFastMatchesGeneral runs both on the same states and compares replies, keys and
-- the messages published.
local queue = KEYS[3] ~= nil
if not queue or redis.pcall('EXISTS', KEYS[2]) == 0 then
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
  end
  local n = redis.call('DEL', KEYS[1])
  if ARGV[2] and ARGV[2] ~= '' then
    redis.pcall('PUBLISH', ARGV[2], ARGV[1])
  end
  if queue and ARGV[3] ~= '' and ARGV[5] ~= '0' and ARGV[5] ~= '' then
    return 2
  end
  return n
end
