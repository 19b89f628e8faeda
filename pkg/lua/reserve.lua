-- reserve.lua: take one unit of an item for a user, atomically.
-- KEYS[1] stock left of the item   ({fs:<sale>}:stock:<item>)
-- KEYS[2] active holders of the sale, a hash user -> order id ({fs:<sale>}:holders)
-- KEYS[3] admission token ids already spent ({fs:<sale>}:q:used)
-- KEYS[4] what each holder's reservation is of, a hash user -> "<item>:<order>"
--         ({fs:<sale>}:holder-items)
-- KEYS[5] which token each order spent, a hash order id -> token id ("-" once
--         given back; {fs:<sale>}:q:used-by)
-- ARGV[1] user id, ARGV[2] order id, ARGV[3] admission token id ("" when none),
-- ARGV[4] item id, ARGV[5] how long the spent tokens are kept (seconds)
-- Returns the stock left after the reservation (>= 0), or
--   -1 sold out, -2 the user already holds a unit in this sale,
--   -3 stock not loaded (a missing key is never read as 0: that would end
--      the sale silently after a Redis restart),
--   -4 the admission token was already spent on a purchase.
-- The duplicate check runs before the decrement, and the comparison is
-- "stock <= 0", so the last unit is sold and never one more.
local stock = redis.call('GET', KEYS[1])
if not stock then
  return -3
end
-- The holder check comes before the spent-token one: a shopper retrying the
-- purchase whose answer she lost carries the token that purchase spent, and
-- must hear about the order she holds, not be sent back to the queue.
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then
  return -2
end
if ARGV[3] ~= '' and redis.call('SISMEMBER', KEYS[3], ARGV[3]) == 1 then
  return -4
end
stock = tonumber(stock)
if stock <= 0 then
  return -1
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
-- The holder names the order, not the item; an order that never reaches
-- PostgreSQL (its gateway died before the publish) has nothing else that
-- says which item's stock its unit belongs to. The entry names its order,
-- so a stale one (the holder released, the user holding a newer order) is
-- recognised and never trusted; it is overwritten by her next reservation.
redis.call('HSET', KEYS[4], ARGV[1], ARGV[4] .. ':' .. ARGV[2])
-- The token is spent with the reservation, in one step: spent after the
-- broker's acknowledgement instead, a lost write (or a gateway dying in
-- between) left it good for a second purchase once this order ended. A
-- purchase that fails gives the token back with its unit (release.lua).
-- The note of which order spent it lets the order service give it back
-- for an order that never came to exist, and lets a late retry of a give-back
-- tell that this order's token went back already (return_token.lua).
if ARGV[3] ~= '' then
  redis.call('SADD', KEYS[3], ARGV[3])
  redis.call('EXPIRE', KEYS[3], ARGV[5])
  redis.call('HSET', KEYS[5], ARGV[2], ARGV[3])
  redis.call('EXPIRE', KEYS[5], ARGV[5])
end
return redis.call('DECR', KEYS[1])
