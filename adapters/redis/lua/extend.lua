-- extend: sets each of n leases to end ttlMs from now (Redis server clock).
--
-- KEYS[i]   (i = 1..n, n ≥ 1) record key of the i-th lease; one slot on Redis Cluster.
-- ARGV[1]   deadline of the call, Unix ms on the Redis server clock; 0 = none (see claim.lua).
-- ARGV[2]   ttlMs: new lease duration from now of every key of the call, ms
-- ARGV[2+i] the i-th lease: `<fence>|<owner>` (fence decimal, owner the owner token)
-- The caller groups extends by ttlMs, so one argument a key is enough.
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

local ttl = tonumber(ARGV[2])
local expiry_text = int(now_ms + ttl)
local out = {0, now_ms}
for i = 1, #KEYS do
  local lease = 'L|' .. ARGV[2 + i] .. '|'
  local fence = string.sub(lease, 3, string.find(lease, '|', 3, true) - 1)
  local raw = redis.call('GET', KEYS[i])
  local code = 0
  local tail = after(raw, lease)
  if tail then
    local attempts, rest = string.match(tail, '^(%d*)|%d*|(.*)$')
    local keep = redis.call('PTTL', KEYS[i])
    if keep < ttl then keep = ttl end
    redis.call('SET', KEYS[i], lease .. attempts .. '|' .. expiry_text .. '|' .. rest, 'PX', keep)
    code = 1
  elseif after(raw, 'D|' .. fence .. '|') then
    code = 2
  elseif after(raw, 'R|' .. string.sub(lease, 3)) then
    code = 3
  elseif foreign(raw) then
    code = 5
  end
  out[i + 2] = code
end
return out
