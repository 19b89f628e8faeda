-- pause.lua: take one slot's stock keys away before a repair rewrites a
-- sharded sale. With the keys gone, reserve, release and moves answer "not
-- loaded", so nothing changes while the repair reads and writes. Each key
-- leaves a marker for as long as a repair may take, which tells release.lua
-- that the key is paused, not lost: a release that meets it must wait for
-- the repair's copy (see release.lua).
-- KEYS pairs: stock key, its pause marker. ARGV[1] the marker's life (ms).
-- Returns the stock keys' values (false when missing), then DELs them.
-- The marker keeps the value ("v:<n>"; "-" for a key that was missing), so
-- a pause run twice (a retry, or one whose reply was lost) returns the
-- values the first took, and the repair can put them back from the markers.
local out = {}
for i = 1, #KEYS, 2 do
  local v = redis.call('GET', KEYS[i])
  if v then
    redis.call('SET', KEYS[i + 1], 'v:' .. v, 'PX', ARGV[1])
    redis.call('DEL', KEYS[i])
  else
    local m = redis.call('GET', KEYS[i + 1])
    if m and string.sub(m, 1, 2) == 'v:' then
      v = string.sub(m, 3)
    end
    redis.call('SET', KEYS[i + 1], m or '-', 'PX', ARGV[1])
  end
  out[(i + 1) / 2] = v
end
return out
