-- move_take.lua: first half of moving units between two stock keys of one
-- item that live in different hash slots (the pool and a shard, or two
-- shards). Takes units from the source and writes the move in this slot's
-- journal, atomically, so a move that never reaches its destination is
-- found again (move_give is idempotent) instead of losing its units.
-- KEYS[1] source stock key, KEYS[2] journal of moves out of this slot (hash
--   move id -> "<destination key> <units> <epoch>", plus the field "#takes"
--   counting every take, so a reader can tell that a move ran between two
--   reads), KEYS[3] this slot's epoch
-- ARGV[1] move id, ARGV[2] destination key,
-- ARGV[3] divisor: take max(1, floor(source / divisor)) units
-- Returns {units taken, epoch}: units 0 when the source is empty, -3 when
-- the source key is missing (not loaded).
local src = redis.call('GET', KEYS[1])
if not src then
  return {-3, ''}
end
src = tonumber(src)
if src <= 0 then
  return {0, ''}
end
local n = math.floor(src / tonumber(ARGV[3]))
if n < 1 then
  n = 1
end
redis.call('DECRBY', KEYS[1], n)
local epoch = redis.call('GET', KEYS[3]) or '0'
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. ' ' .. n .. ' ' .. epoch)
redis.call('HINCRBY', KEYS[2], '#takes', 1)
return {n, epoch}
