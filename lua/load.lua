-- load.lua: write a sale's hot copy from PostgreSQL's numbers (warm-up, repair).
-- KEYS[1] holders hash, KEYS[2..n+1] stock keys of the sale's items
-- ARGV[1] channel, ARGV[2] sale id, ARGV[3..n+2] stock left per item (same order as KEYS),
-- ARGV[n+3..] user id, order id pairs of the active orders.
-- SET, never INCRBY: loading twice gives the same stock, not double.
local n = #KEYS - 1
redis.call('DEL', KEYS[1])
for i = 1, n do
  redis.call('SET', KEYS[i + 1], ARGV[i + 2])
end
for i = n + 3, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('PUBLISH', ARGV[1], ARGV[2])
return n
