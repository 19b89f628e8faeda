-- queue_size.lua: how many places of a sale's queue wait for admission.
-- Two ZCARDs and one HGET in one atomic step (O(1), whatever the crowd), so
-- a dashboard polling every second costs Redis nothing worth measuring.
-- KEYS: 1 pre, 2 post, 3 adm (hash: admitted)
-- Returns {waiting, handed out, admitted}. A place whose holder stopped
-- polling still waits here until admission reaches and skips it.
local size = redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[2])
local admitted = math.floor(tonumber(redis.call('HGET', KEYS[3], 'admitted') or '0'))
local waiting = size - admitted
if waiting < 0 then
  waiting = 0
end
return {waiting, size, admitted}
