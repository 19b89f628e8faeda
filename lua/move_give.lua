-- move_give.lua: second half of a move (see move_take.lua): adds the units
-- to the destination, at most once per move id.
-- KEYS[1] destination stock key, KEYS[2] ids of the moves already applied in
--   this slot (a set), KEYS[3] this slot's epoch
-- ARGV[1] move id, ARGV[2] units, ARGV[3] epoch of the take,
-- ARGV[4] pub/sub channel told about returned stock, ARGV[5] its message
-- Returns 1 applied, 0 already applied, -1 void because the sale was loaded
-- again after the take (the load counted those units from PostgreSQL),
-- -3 void because the destination is not loaded (the next load counts them).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -3
end
if (redis.call('GET', KEYS[3]) or '0') ~= ARGV[3] then
  return -1
end
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then
  return 0
end
redis.call('EXPIRE', KEYS[2], 604800)
redis.call('INCRBY', KEYS[1], ARGV[2])
redis.call('PUBLISH', ARGV[4], ARGV[5])
return 1
