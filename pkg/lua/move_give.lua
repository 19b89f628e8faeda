-- move_give.lua: second half of a move (see move_take.lua): adds the units
-- to the destination, at most once per move id.
-- KEYS[1] destination stock key, KEYS[2] ids of the moves already applied in
--   this slot (a set), KEYS[3] this slot's epoch
-- ARGV[1] move id, ARGV[2] units, ARGV[3] epoch of the take
-- Epochs are load times (microseconds); every slot of a sale gets the same
-- one from a load, the pool's slot first.
-- Returns 1 applied, 0 already applied,
--   -1 void: the destination was loaded after the take, and that load
--      counted those units from PostgreSQL (the journal entry can go),
--   -2 not yet: the take comes from a load that has not reached the
--      destination yet; applied once it has (the entry stays),
--   -3 not yet: the destination is not loaded (paused for a repair, or lost);
--      a load voids the entry, a restore lets it apply (the entry stays).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -3
end
local dst = tonumber(redis.call('GET', KEYS[3]) or '0') or 0
local took = tonumber(ARGV[3]) or 0
if took < dst then
  return -1
end
if took > dst then
  return -2
end
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then
  return 0
end
redis.call('EXPIRE', KEYS[2], 604800)
redis.call('INCRBY', KEYS[1], ARGV[2])
return 1
