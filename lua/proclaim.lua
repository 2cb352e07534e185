-- proclaim.lua: store the leader's value, only while the election's lock key holds the
-- leader's holder id (election.go, docs/design.md §3.12).
--
-- KEYS[1]  the election's lock key
-- KEYS[2]  the election's leader record, in the same cluster hash slot
-- ARGV[1]  the leader's holder id
-- ARGV[2]  the proclamation's number within this leadership (1 for the first)
-- ARGV[3]  the leadership's term (its fencing token, decimal)
-- ARGV[4]  the value
-- ARGV[5]  optional: a channel on which the change is announced (pcall: an ACL without
--          PUBLISH or the channel still proclaims)
--
-- The record is "id seq term value". Returns 1 when the record is the leader's and at least
-- this proclamation's number (written now, or by this very proclamation before: a resend),
-- 0 when the lock key is absent or another holder's: then nothing changed. The record has no
-- expiry: it is read only beside the lock key, whose holder id it must carry (leader.lua),
-- so a record left by an earlier leader is ignored, and the next leader overwrites it.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local cur = redis.call('GET', KEYS[2])
if cur then
  local id, seq = string.match(cur, '^(%x+) (%d+) ')
  if id == ARGV[1] and tonumber(seq) >= tonumber(ARGV[2]) then
    return 1
  end
end
redis.call('SET', KEYS[2], ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3] .. ' ' .. ARGV[4])
if ARGV[5] and ARGV[5] ~= '' then
  redis.pcall('PUBLISH', ARGV[5], ARGV[1] .. ':' .. ARGV[2])
end
return 1
