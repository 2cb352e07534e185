-- fence_get.lua: read a fenced string value and the highest token admitted for its key, in one
-- atomic step, so the two always belong together.
--
-- KEYS[1]  the data key
-- KEYS[2]  its token key (see fence_write.lua), in the same cluster hash slot as KEYS[1]
--
-- Returns {value, token}. Either is false (a nil reply) when its key does not exist. A data
-- key that holds another type than a string makes GET, and so the script, fail with WRONGTYPE.
return {redis.call('GET', KEYS[1]), redis.call('GET', KEYS[2])}
