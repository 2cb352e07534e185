-- leader.lua: read an election on this node, atomically, changing nothing (election.go).
--
-- KEYS[1]  the election's lock key
-- KEYS[2]  the election's leader record (proclaim.lua), in the same cluster hash slot
--
-- Returns {holder id or "", remaining ms of the lock key (-2 when absent), the record or ""}.
return {redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]) or ''}
