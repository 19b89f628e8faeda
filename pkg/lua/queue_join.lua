-- queue_join.lua: give a user a place in a sale's virtual queue (idempotent).
-- KEYS[1] pre   zset ticket -> random draw key (joined before the opening)
-- KEYS[2] post  zset ticket -> arrival sequence (joined after the opening)
-- KEYS[3] users hash user -> ticket
-- KEYS[4] tix   hash ticket -> user
-- KEYS[5] seen  zset ticket -> last poll (ms)
-- KEYS[6] dead  set of tickets that lost their place
-- KEYS[7] seq   arrival counter
-- KEYS[8] adm   admission state (queue_advance.lua): its "last" field is
--               written by the first round after the opening
-- ARGV[1] user, ARGV[2] new ticket id, ARGV[3] random draw key (0..2^52),
-- ARGV[4] opening time (ms), ARGV[5] "1" to draw the pre-queue at random
-- Returns the user's ticket (the existing one if the user already queued).
-- Redis' clock decides before/after the opening, so every gateway agrees;
-- once an admission round has run after the opening (adm's "last" is
-- set), a join is after the opening whatever the clock says now: a clock
-- that stepped back (a failover to a replica behind it) or an opening
-- moved later in the database must not put a joiner into the drawn
-- pre-queue, ahead of places already admitted.
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local existing = redis.call('HGET', KEYS[3], ARGV[1])
if existing and redis.call('SISMEMBER', KEYS[6], existing) == 0 then
  redis.call('ZADD', KEYS[5], now, existing)
  return existing
end
local ticket = ARGV[2]
if now < tonumber(ARGV[4]) and ARGV[5] == '1' and redis.call('HEXISTS', KEYS[8], 'last') == 0 then
  -- Early joiners are ordered by a random key, not by arrival: clicking
  -- first before the opening gains nothing.
  redis.call('ZADD', KEYS[1], tonumber(ARGV[3]), ticket)
else
  redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[7]), ticket)
end
redis.call('HSET', KEYS[3], ARGV[1], ticket)
redis.call('HSET', KEYS[4], ticket, ARGV[1])
redis.call('ZADD', KEYS[5], now, ticket)
return ticket
