end
local r = acquire_body()
if type(r) ~= 'table' and (type(r) == 'string' or r > 0) and redis.call('GET', intent) == waiter then
  redis.call('DEL', intent) -- our Client's turn came: readers may come again after us
end
return r
