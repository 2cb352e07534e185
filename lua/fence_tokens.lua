-- fence_tokens.lua: comparing fencing tokens, shared by fence_write.lua and
-- fence_incr_all.lua (redisfence.go puts this file in front of each of them).
--
-- Tokens can exceed 2^53, where Lua's numbers (doubles) lose precision, so they are compared
-- as 20-digit decimal strings split into two exact halves. Both must be decimal integers
-- without leading zeros, at most 20 digits (the Go side sends only such).

local function below(a, b)
  a = string.rep('0', 20 - #a) .. a
  b = string.rep('0', 20 - #b) .. b
  local ahigh, bhigh = tonumber(string.sub(a, 1, 10)), tonumber(string.sub(b, 1, 10))
  if ahigh ~= bhigh then
    return ahigh < bhigh
  end
  return tonumber(string.sub(a, 11)) < tonumber(string.sub(b, 11))
end

-- is_token reports whether a stored value is a token as the fence writes them: 1 to 20 decimal
-- digits. Anything else in a token key (written by someone else) is an error, not a token.
local function is_token(v)
  return #v >= 1 and #v <= 20 and string.match(v, '^[0-9]+$') ~= nil
end
