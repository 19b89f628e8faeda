-- pause.lua: take one slot's stock keys away before a repair rewrites a
-- sharded sale. With the keys gone, reserve, release and moves answer "not
-- loaded", so nothing changes while the repair reads and writes.
-- KEYS stock keys. Returns their values (false when missing), then DELs them.
local out = {}
for i = 1, #KEYS do
  out[i] = redis.call('GET', KEYS[i])
end
redis.call('DEL', unpack(KEYS))
return out
