-- extend_multi.lua: compare-and-pexpire for a multi-key lock. Give every lock key a new TTL,
-- but only if every one of them still holds our id on this node.
--
-- KEYS     the lock keys
-- ARGV[1]  the holder id
-- ARGV[2]  the new TTL in milliseconds
--
-- Returns 1 when every key got the new TTL, 0 (and nothing changed) when some key is absent
-- or belongs to another holder. An expired key is never re-created; counters are untouched.
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then
    return 0
  end
end
for i = 1, #KEYS do
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
return 1
