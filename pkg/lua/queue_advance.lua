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
local steps = 0
while budget >= 1 and admitted < size and steps < tonumber(ARGV[5]) do
  local ticket
  if admitted < npre then
    ticket = redis.call('ZRANGE', KEYS[1], admitted, admitted)[1]
  else
    ticket = redis.call('ZRANGE', KEYS[2], admitted - npre, admitted - npre)[1]
  end
  local seen = tonumber(redis.call('ZSCORE', KEYS[5], ticket) or '0')
  if now - seen <= grace then
    budget = budget - 1
  else
    -- abandoned: the place is skipped at no cost, its holder may join again
    redis.call('SADD', KEYS[6], ticket)
    local user = redis.call('HGET', KEYS[4], ticket)
    if user and redis.call('HGET', KEYS[3], user) == ticket then
      redis.call('HDEL', KEYS[3], user)
    end
  end
  admitted = admitted + 1
  steps = steps + 1
end
redis.call('HSET', KEYS[7], 'admitted', admitted, 'last', now, 'budget', budget)
return {admitted, tostring(rate)}
