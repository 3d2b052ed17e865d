-- extend: sets each of n leases to end ttlMs from now (Redis server clock).
--
-- KEYS[i]   (i = 1..n, n ≥ 1) record key of the i-th lease; one slot on Redis Cluster.
-- ARGV[1]   deadline of the call, Unix ms on the Redis server clock; 0 = none (see claim.lua).
-- Then 3 arguments per key, ARGV[1 + 3(i-1) + 1 .. 3]:
--   fence   fencing token of the lease, decimal
--   owner   owner token of the lease
--   ttlMs   new lease duration from now, ms
--
-- Returns {0, nowMs, code_1, ..., code_n}, or {1, nowMs} when the deadline has passed, with
--   1 OK         the lease now ends at nowMs + ttlMs; the retention (PX) grows to ttlMs if shorter
--   2 COMMITTED  the key is done by this same lease (same fence); nothing written
--   3 RELEASED   this same lease released the key and nobody claimed it since; nothing written
--   0 LOST       the record belongs to another acquisition (a newer fence), or is gone
--   5 FOREIGN    the key holds a value twophase did not write
-- A lease that expired but was not taken over is still the owner's: it is extended (OK).
--- @include "record"

local now_us, now_ms, late = begin(ARGV[1])
if late then return {1, now_ms} end

local out = {0, now_ms}
for i = 1, #KEYS do
  local j = 1 + (i - 1) * 3
  local fence, owner, ttl = ARGV[j + 1], ARGV[j + 2], tonumber(ARGV[j + 3])
  local raw = redis.call('GET', KEYS[i])
  local code = 0
  local lease = 'L|' .. fence .. '|' .. owner .. '|'
  local tail = after(raw, lease)
  if tail then
    local attempts, rest = string.match(tail, '^(%d*)|%d*|(.*)$')
    local keep = redis.call('PTTL', KEYS[i])
    if keep < ttl then keep = ttl end
    redis.call('SET', KEYS[i], lease .. attempts .. '|' .. int(now_ms + ttl) .. '|' .. rest, 'PX', keep)
    code = 1
  elseif after(raw, 'D|' .. fence .. '|') then
    code = 2
  elseif after(raw, 'R|' .. fence .. '|' .. owner .. '|') then
    code = 3
  elseif foreign(raw) then
    code = 5
  end
  out[i + 2] = code
end
return out
