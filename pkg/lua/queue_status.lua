-- queue_status.lua: where a ticket stands; polling also keeps it alive.
-- KEYS: 1 pre, 2 post, 3 tix, 4 seen, 5 dead, 6 adm (hash: admitted, rate)
-- ARGV[1] ticket, ARGV[2] opening time (ms), ARGV[3] the asking user ("":
-- anyone; a ticket asked about by another user is unknown to them, and
-- their poll does not keep its place alive)
-- Returns {code, position, admitted, size, user}:
--   code 1 = queued (position 0 while the pre-queue is not drawn yet),
--   code -1 = unknown ticket, code -2 = the ticket lost its place.
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local user = redis.call('HGET', KEYS[3], ARGV[1])
if not user or (ARGV[3] ~= '' and ARGV[3] ~= user) then
  return {-1, 0, 0, 0, ''}
end
if redis.call('SISMEMBER', KEYS[5], ARGV[1]) == 1 then
  return {-2, 0, 0, 0, user}
end
redis.call('ZADD', KEYS[4], now, ARGV[1])
local npre = redis.call('ZCARD', KEYS[1])
local size = npre + redis.call('ZCARD', KEYS[2])
local admitted = math.floor(tonumber(redis.call('HGET', KEYS[6], 'admitted') or '0'))
local pos = 0
local r = redis.call('ZRANK', KEYS[1], ARGV[1])
if r then
  if now >= tonumber(ARGV[2]) then
    pos = r + 1
  end
else
  r = redis.call('ZRANK', KEYS[2], ARGV[1])
  if r then
    pos = npre + r + 1
  end
end
return {1, pos, admitted, size, user}
