-- queue_advance.lua: admit shoppers at the operator's rate. Every gateway
-- calls it on a timer; the budget comes from the time elapsed since the
-- last call (Redis' clock), so more gateways do not admit faster.
-- KEYS: 1 pre, 2 post, 3 users, 4 tix, 5 seen, 6 dead, 7 adm
-- ARGV[1] opening time (ms), ARGV[2] default rate (per second),
-- ARGV[3] grace (ms) after the last poll before a place is given up,
-- ARGV[4] "1" when the sale is sold out (admission stops),
-- ARGV[5] most places to look at in one call.
-- Returns {admitted, rate as text}.
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local opens = tonumber(ARGV[1])
local st = redis.call('HMGET', KEYS[7], 'admitted', 'last', 'rate', 'budget')
local admitted = tonumber(st[1] or '0')
local rate = tonumber(st[3] or ARGV[2])
if now < opens then
  return {admitted, tostring(rate)}
end
local last = tonumber(st[2] or ARGV[1])
local budget = tonumber(st[4] or '0')
if ARGV[4] == '1' then
  -- sold out: nobody is admitted, not even with a budget saved up before
  budget = 0
elseif now > last then
  -- at most one second's worth is saved up, so an idle gap is no burst
  budget = math.min(budget + (now - last) / 1000 * rate, math.max(rate, 1))
end
local npre = redis.call('ZCARD', KEYS[1])
local size = npre + redis.call('ZCARD', KEYS[2])
local grace = tonumber(ARGV[3])
local maxSteps = tonumber(ARGV[5])
local steps = 0
-- writeOff gives up abandoned places: marked dead, their holders free to
-- join again (unless they already did, with another ticket).
local function writeOff(gone)
  redis.call('SADD', KEYS[6], unpack(gone))
  local users = redis.call('HMGET', KEYS[4], unpack(gone))
  local named, tickets = {}, {}
  for i = 1, #gone do
    if users[i] then
      named[#named + 1], tickets[#named + 1] = users[i], gone[i]
    end
  end
  if #named == 0 then
    return
  end
  local current = redis.call('HMGET', KEYS[3], unpack(named))
  local free = {}
  for i = 1, #named do
    if current[i] == tickets[i] then
      free[#free + 1] = named[i]
    end
  end
  if #free > 0 then
    redis.call('HDEL', KEYS[3], unpack(free))
  end
end
-- The places are read a chunk at a time (one ZRANGE and one ZMSCORE per
-- chunk, never crossing from the pre-queue to the queue), and a chunk's
-- abandoned ones written off together: read one by one, a round over
-- 20,000 abandoned places held the sale's Redis node for 73 ms.
while budget >= 1 and admitted < size and steps < maxSteps do
  local key, from, last = KEYS[1], admitted, npre - 1
  if admitted >= npre then
    key, from, last = KEYS[2], admitted - npre, size - npre - 1
  end
  local to = math.min(from + 99, last, from + maxSteps - steps - 1)
  local tickets = redis.call('ZRANGE', key, from, to)
  if #tickets == 0 then
    break
  end
  local seen = redis.call('ZMSCORE', KEYS[5], unpack(tickets))
  local gone = {}
  for i = 1, #tickets do
    if budget < 1 then
      break
    end
    if now - tonumber(seen[i] or '0') <= grace then
      budget = budget - 1
    else
      -- abandoned: the place is skipped at no cost
      gone[#gone + 1] = tickets[i]
    end
    admitted = admitted + 1
    steps = steps + 1
  end
  if #gone > 0 then
    writeOff(gone)
  end
end
redis.call('HSET', KEYS[7], 'admitted', admitted, 'last', now, 'budget', budget)
return {admitted, tostring(rate)}
