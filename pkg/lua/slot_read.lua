-- slot_read.lua: everything one hash slot of a sharded sale holds, read at
-- one instant, for reconciliation.
-- KEYS[1] holders hash, KEYS[2] moves-out journal, KEYS[3] moves-applied
-- set, KEYS[4] epoch, KEYS[5..] stock keys
-- Returns {holders (flat user, order list), journal (flat id, value list),
-- applied move ids, epoch (false when missing), stock values (false when
-- missing) in KEYS order}.
local stocks = {}
for i = 5, #KEYS do
  stocks[#stocks + 1] = redis.call('GET', KEYS[i])
end
return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2]),
  redis.call('SMEMBERS', KEYS[3]), redis.call('GET', KEYS[4]), stocks}
