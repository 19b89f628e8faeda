-- load.lua: write one hash slot of a sale's hot copy from PostgreSQL's
-- numbers (warm-up, repair). An unsharded sale is one slot; a sharded one
-- is loaded slot by slot (the pool's, then each shard's).
-- KEYS[1] holders hash, KEYS[2] moves-out journal, KEYS[3] moves-applied
-- set, KEYS[4] epoch, KEYS[5..n+4] stock keys
-- ARGV[1] channel, ARGV[2] message, ARGV[3] epoch, ARGV[4..n+3] stock per
-- key (same order as KEYS), ARGV[n+4..] user id, order id pairs of the
-- active orders held in this slot.
-- SET, never INCRBY: loading twice gives the same stock, not double. The new
-- epoch voids every move taken before this load (move_give.lua).
local n = #KEYS - 4
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('SET', KEYS[4], ARGV[3])
for i = 1, n do
  redis.call('SET', KEYS[i + 4], ARGV[i + 3])
end
for i = n + 4, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('PUBLISH', ARGV[1], ARGV[2])
return n
