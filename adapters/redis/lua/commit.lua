-- commit: marks each of n business keys done for the lease identified by (fence, owner).
--
-- KEYS[i]   (i = 1..n, n ≥ 1) record key of the i-th lease; one slot on Redis Cluster.
-- ARGV[1]   deadline of the call, Unix ms on the Redis server clock; 0 = none (see claim.lua).
-- ARGV[2]   doneTtlMs: how long every done record of the call is kept (the key's new PX), ms
-- ARGV[2+i] the i-th lease and result: `<fence>|<owner>|<result>`; fence decimal, owner the owner
--           token (no `|`), result the JSON result to store, empty for none (JSON is never empty)
-- The caller groups commits by doneTtlMs, so one argument a key is enough.
--
-- Returns {0, nowMs, code_1, ..., code_n}, or {1, nowMs} when the deadline has passed, with
--   1 OK         the key is now done
--   2 COMMITTED  the key was already done by this same lease (same fence): a repeat, for example
--                the retry of a commit whose reply was lost; nothing written
--   3 RELEASED   this same lease (fence and owner) released the key earlier and nobody claimed it
--                since; nothing written
--   0 LOST       the record belongs to another acquisition (a newer fence), or is gone
--   5 FOREIGN    the key holds a value twophase did not write
-- A lease that expired but was not taken over is still the owner's: it commits (OK).
-- The done record drops the owner token and the lease expiry; it keeps the fence, which is unique
-- per acquisition of the key (claim.lua), so a repeat by this lease is told from a newer owner.
--- @include "record"

local now_us, now_ms, late = begin(ARGV[1])
if late then return {1, now_ms} end

local done_ttl = ARGV[2]
local out = {0, now_ms}
for i = 1, #KEYS do
  local arg = ARGV[2 + i]
  local fence_end = string.find(arg, '|', 1, true)
  local owner_end = string.find(arg, '|', fence_end + 1, true)
  -- lease = `<fence>|<owner>|`, as the leased record holds it after its state.
  local lease = string.sub(arg, 1, owner_end)
  local fence = string.sub(arg, 1, fence_end - 1)
  local raw = redis.call('GET', KEYS[i])
  local code = 0
  local tail = after(raw, 'L|' .. lease)
  if tail then
    -- tail = <attempts>|<leaseExpiryMs>|<fingerprintBytes>|<fingerprint>
    local attempts, rest = string.match(tail, '^(%d*)|%d*|(.*)$')
    redis.call('SET', KEYS[i], 'D|' .. fence .. '||' .. attempts .. '||' .. rest .. string.sub(arg, owner_end + 1), 'PX', done_ttl)
    code = 1
  elseif after(raw, 'D|' .. fence .. '|') then
    code = 2
  elseif after(raw, 'R|' .. lease) then
    code = 3
  elseif foreign(raw) then
    code = 5
  end
  out[i + 2] = code
end
return out
