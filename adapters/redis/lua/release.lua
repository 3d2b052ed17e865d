-- release: gives up each of n leases so the keys can be claimed again at once.
--
-- KEYS[i]   (i = 1..n, n ≥ 1) record key of the i-th lease; one slot on Redis Cluster.
-- ARGV[1]   deadline of the call, Unix ms on the Redis server clock; 0 = none (see claim.lua).
-- ARGV[2]   attempts: '1' to zero the attempt count of every key of the call (a dead-letter: a
--           replay starts at attempt 1); '2' to take the released attempt off the count (a
--           shutdown stopped it: the next claim repeats its number); else '0' (kept)
-- ARGV[2+i] the i-th lease: `<fence>|<owner>` (fence decimal, owner the owner token)
-- The caller groups releases by that argument, so one argument a key is enough.
--
-- Returns {0, nowMs, code_1, ..., code_n}, or {1, nowMs} when the deadline has passed, with
--   1 OK         released
--   3 RELEASED   this same lease had already released it (a repeat, for example the retry of a
--                release whose reply was lost); nothing written
--   2 COMMITTED  the key is done by this same lease (same fence): its own commit landed, perhaps
--                with its reply lost; the key stays done, nothing written
--   0 LOST       the record belongs to another acquisition (a newer fence), or is gone; nothing written
--   5 FOREIGN    the key holds a value twophase did not write
-- The released record keeps its fence, attempt count (unless reset or uncounted), fingerprint and owner, and
-- its retention (the claim's doneTtlMs, KEEPTTL), so the next claim continues the attempt count
-- and the fence.
--- @include "record"

local now_us, now_ms, late = begin(ARGV[1])
if late then return {1, now_ms} end

local reset = ARGV[2] == '1'
local uncount = ARGV[2] == '2'
local out = {0, now_ms}
for i = 1, #KEYS do
  local lease = ARGV[2 + i] .. '|'
  local fence = string.sub(lease, 1, string.find(lease, '|', 1, true) - 1)
  local raw = redis.call('GET', KEYS[i])
  local code = 0
  local tail = after(raw, 'L|' .. lease)
  if tail then
    local attempts, rest = string.match(tail, '^(%d*)|%d*|(.*)$')
    if reset then
      attempts = '0'
    elseif uncount and (tonumber(attempts) or 0) > 0 then
      attempts = tostring(tonumber(attempts) - 1)
    end
    redis.call('SET', KEYS[i], 'R|' .. lease .. attempts .. '||' .. rest, 'KEEPTTL')
    code = 1
  elseif after(raw, 'R|' .. lease) then
    code = 3
  elseif after(raw, 'D|' .. fence .. '|') then
    code = 2
  elseif foreign(raw) then
    code = 5
  end
  out[i + 2] = code
end
return out
