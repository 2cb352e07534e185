-- heal.lua: give back to a node that lost them (it restarted empty, or evicted them) the lock
-- keys of a lock that a quorum of other nodes has just confirmed, and lift its counters to at
-- least the lock's tokens. It never takes a key from another holder.
--
-- KEYS     pairs: KEYS[2i-1] is the i-th lock key, KEYS[2i] its fence counter key (same
--          cluster hash slot); a single-key lock is the case of one pair
-- ARGV[1]  the holder id
-- ARGV[2]  the TTL for the keys set here, in milliseconds: at most the validity time the
--          lock has left (plus the lock-delay, if any)
-- ARGV[3]  the counters' idle TTL in milliseconds; "0" for counters that never expire
-- ARGV[4]  "1" to lift the counters, "0" for a lock without fencing (counters untouched)
-- ARGV[5]  the seed for a missing counter: the healing client's clock in microseconds
-- ARGV[6…] the lock's token for each key, in KEYS order (when ARGV[4] is "1")
--
-- Returns 1 when every key now holds our id here (set by this script or still ours), 0 when
-- some key belongs to another holder: then nothing was changed. Keys that are still ours
-- keep their TTL. An existing counter below the token is set to the token; a higher one
-- stays. A missing counter (the node lost it) gets the larger of the seed and the token, as an
-- acquire would seed it from the clock: a token the node had issued before it lost its state
-- may be above ours, and the seed is what clears it (docs/design.md §5.6).
local n = #KEYS / 2
for i = 1, n do
  local holder = redis.call('GET', KEYS[2 * i - 1])
  if holder and holder ~= ARGV[1] then
    return 0
  end
end
for i = 1, n do
  local lock, fence = KEYS[2 * i - 1], KEYS[2 * i]
  redis.call('SET', lock, ARGV[1], 'NX', 'PX', ARGV[2])
  if ARGV[4] == '1' then
    local token = ARGV[5 + i]
    local current = redis.call('GET', fence)
    if not current and tonumber(ARGV[5]) > tonumber(token) then
      token = ARGV[5]
    end
    if not current or tonumber(current) < tonumber(token) then
      if ARGV[3] ~= '0' then
        redis.call('SET', fence, token, 'PX', ARGV[3])
      else
        redis.call('SET', fence, token)
      end
    end
  end
end
return 1
