-- return_token.lua: make the admission token a failed purchase spent good
-- again, once.
-- KEYS[1] active holders of the sale (her shard's), KEYS[2] admission token
-- ids already spent, KEYS[3] which token each order spent (order id ->
-- token id, "-" once given back; all three in the same slot)
-- ARGV[1] user id, ARGV[2] the admission token id, ARGV[3] the order id
-- whose reservation spent it
-- Returns 1 when the token was given back, 0 when it was not spent or this
-- order's token went back already, -1 when (for a reservation with no note)
-- she holds a unit.
-- With a note the answer is exact: a late retry of a failed purchase's
-- give-back, after she bought again with the token it had returned (and
-- whether or not that second order has ended since), finds "-" and keeps
-- the token spent; one admission buys once.
local by = redis.call('HGET', KEYS[3], ARGV[3])
if by then
  if by ~= ARGV[2] then
    return 0
  end
  redis.call('HSET', KEYS[3], ARGV[3], '-')
  return redis.call('SREM', KEYS[2], ARGV[2])
end
-- No note (a reservation older than the notes, or than their week): while
-- she holds a unit the token may have bought it, so it stays spent.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return -1
end
return redis.call('SREM', KEYS[2], ARGV[2])
