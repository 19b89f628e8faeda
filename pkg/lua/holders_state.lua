-- holders_state.lua: a slot's holder count and holders' version, read at
-- one instant (stock.HolderState). Holders are added only by the reserve
-- script, which raises the count, and taken away only by a release, a load
-- or a repair, each of which bumps the version in the same atomic step:
-- while both are what they were, the holders are the same.
-- KEYS[1] holders hash, KEYS[2] holders' version hash
-- Returns {count, version (0 when never bumped), the state a pass marked
-- settled ("<count>:<version>", false when none)}.
return {redis.call('HLEN', KEYS[1]), tonumber(redis.call('HGET', KEYS[2], 'v') or '0'),
  redis.call('HGET', KEYS[2], 'settled')}
