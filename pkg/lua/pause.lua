-- pause.lua: take one slot's stock keys away before a repair rewrites a
-- sharded sale. With the keys gone, reserve, release and moves answer "not
-- loaded", so nothing changes while the repair reads and writes. Each key
-- leaves a marker for as long as a repair may take, which tells release.lua
-- that the key is paused, not lost: a release that meets it must wait for
-- the repair's copy (see release.lua).
-- KEYS pairs: stock key, its pause marker. ARGV[1] the marker's life (ms).
-- Returns the stock keys' values (false when missing), then DELs them.
local out = {}
for i = 1, #KEYS, 2 do
  out[(i + 1) / 2] = redis.call('GET', KEYS[i])
  redis.call('SET', KEYS[i + 1], '1', 'PX', ARGV[1])
  redis.call('DEL', KEYS[i])
end
return out
