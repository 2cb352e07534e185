end
local r = acquire_body()
if type(r) ~= 'table' and (type(r) == 'string' or r > 0) and redis.call('GET', intent) == waiter then
  redis.call('DEL', intent) -- our Client's turn came: readers may come again after us
end
if type(r) == 'number' and r < 0 then
  return r * 65536 -- the writer key is held: why 0 (rw_gate.lua's encoding)
end
return r
