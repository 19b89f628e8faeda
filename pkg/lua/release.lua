-- release.lua: give back the unit held by one order, at most once.
-- KEYS[1] stock left of the item, KEYS[2] active holders of the sale,
-- KEYS[3] admission token ids already spent, KEYS[4] KEYS[1]'s pause marker,
-- KEYS[5] which token each order spent (order id -> token id, "-" once back),
-- KEYS[6] the holders' version, a hash whose field "v" changes with every
--   release that takes a holder away (see below)
-- ARGV[1] user id, ARGV[2] order id, ARGV[3] pub/sub channel told about returned stock,
-- ARGV[4] message published on it ("<sale>:<item>"),
-- ARGV[5] "drop" to free the user without returning the unit (an order
--   PostgreSQL refused for lack of stock: that unit never existed there),
-- ARGV[6] the admission token the reservation spent, given back with the
--   unit; "*" for whichever token KEYS[5] notes this order spent (the order
--   service, which knows no token); "" to keep it spent: an order that
--   existed used its admission
-- Returns 1 when the unit went back, 0 when this order held nothing (already
-- released, never reserved, or the user now holds a newer order), -3 when the
-- stock key is missing (not loaded: reconciliation from PostgreSQL decides;
-- the admission is given back all the same),
-- -5 when a repair has paused it (pause.lua): the repair's copy keeps this
-- holder, so the release must be tried again once the copy is written.
-- Keying the release on the order id, not only the user, is what makes a
-- redelivered or repeated release harmless.
-- giveBack makes the admission token this order's reservation spent good
-- again: token, or for "*" the one KEYS[5] notes. The note, where there is
-- one, must still name that token: "-" means it went back already (and
-- may have bought another unit since). It is then noted given back.
local function giveBack(token)
  if token == '' then
    return
  end
  local noted = redis.call('HGET', KEYS[5], ARGV[2])
  if token == '*' then
    token = noted
  end
  if not token or token == '-' or (noted and noted ~= token) then
    return
  end
  redis.call('SREM', KEYS[3], token)
  if noted then
    redis.call('HSET', KEYS[5], ARGV[2], '-')
  end
end
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then
  -- An order that never came to exist ("*": the order service's relay)
  -- gives its admission back even when someone else took its holder away
  -- first: a repair or a reload drops holders whose orders are being
  -- released. (With its holder still there, the token goes back with the
  -- unit below, not before a pause or a missing key is known.)
  if ARGV[6] == '*' then
    giveBack('*')
  end
  return 0
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  if redis.call('EXISTS', KEYS[4]) == 1 then
    return -5
  end
  -- Not loaded, and no repair under way to put it back: the reload or
  -- repair from PostgreSQL decides the unit and the holder, and nobody
  -- retries this release. An order that never came to exist still gives
  -- its admission back (the holder names it, so its reservation spent
  -- the token), once: nothing else would.
  giveBack(ARGV[6])
  return -3
end
redis.call('HDEL', KEYS[2], ARGV[1])
-- The order service's abandoned-reservation pass skips a slot whose holder
-- count, version and epoch are the ones it last found every holder
-- explained at (field "settled"; holders_state.lua). A reservation raises
-- the count; a release lowers it and gives the version a value it never
-- had, so a reservation that takes the released holder's place is never
-- taken for the settled state. Not a count: a replica promoted without
-- the last releases would count to the same versions again over other
-- holders. The server's clock, and a counter for two releases in one
-- microsecond.
local now = redis.call('TIME')
redis.call('HSET', KEYS[6], 'v', now[1] .. '.' .. now[2] .. '.' .. redis.call('HINCRBY', KEYS[6], 'n', 1))
giveBack(ARGV[6])
if ARGV[5] == 'drop' then
  return 1
end
redis.call('INCR', KEYS[1])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
