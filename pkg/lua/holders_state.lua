-- holders_state.lua: a slot's holders' state, read at one instant
-- (stock.HolderState), or recorded as settled if the slot is still in a
-- state read before (stock.MarkSettled).
-- Holders are added only by the reserve script, which raises their count,
-- and taken away only by a release, which gives the version a new value in
-- the same atomic step (release.lua), or by a load or a repair, which set
-- a new epoch (load.lua, stock.writeCopy): a slot rebuilt after a Redis
-- loss is never in a state read before it. While the state is what it
-- was, the holders are the same ones. (Not quite after a failover that
-- lost reservations: others can bring the count back to a state read
-- before it. Such a failover calls for a repair, which sets a new epoch.)
-- KEYS[1] holders hash, KEYS[2] holders' version hash (fields "v" and
-- "settled"), KEYS[3] the slot's epoch
-- ARGV[1] (to record) the state a pass found settled
-- Returns, to read: {count, state "<count>:<version>:<epoch>", the state
-- recorded settled (false when none)}; to record: 1 recorded, 0 the state
-- has changed since (nothing written).
local count = redis.call('HLEN', KEYS[1])
local state = count .. ':' .. (redis.call('HGET', KEYS[2], 'v') or '0') .. ':' .. (redis.call('GET', KEYS[3]) or '')
if ARGV[1] then
  if ARGV[1] ~= state then
    return 0
  end
  redis.call('HSET', KEYS[2], 'settled', state)
  return 1
end
return {count, state, redis.call('HGET', KEYS[2], 'settled')}
