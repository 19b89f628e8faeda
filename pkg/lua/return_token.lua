-- return_token.lua: make a spent admission token good again, unless its
-- shopper holds a unit in the sale now.
-- KEYS[1] active holders of the sale (her shard's), KEYS[2] admission token
-- ids already spent (the same slot)
-- ARGV[1] user id, ARGV[2] the admission token id
-- Returns 1 when the token was given back, 0 when it was not spent, -1
-- when she holds a unit: the token was given back once already and has
-- bought that unit (a late retry of a failed purchase's release, after she
-- bought again with it), so it stays spent; one admission buys once.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return -1
end
return redis.call('SREM', KEYS[2], ARGV[2])
