-- commit: marks each of n business keys done for the lease identified by (fence, owner).
--
-- KEYS[i]   (i = 1..n, n ≥ 1) record key of the i-th lease; one slot on Redis Cluster.
-- ARGV[1]   deadline of the call, Unix ms on the Redis server clock; 0 = none (see claim.lua).
-- Then 4 arguments per key, ARGV[1 + 4(i-1) + 1 .. 4]:
--   fence       fencing token of the lease, decimal
--   owner       owner token of the lease
--   doneTtlMs   how long the done record is kept (the key's new PX), ms
--   result      the JSON result to store; '' for none
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

local out = {0, now_ms}
for i = 1, #KEYS do
  local j = 1 + (i - 1) * 4
  local fence, owner, done_ttl, result = ARGV[j + 1], ARGV[j + 2], ARGV[j + 3], ARGV[j + 4]
  local raw = redis.call('GET', KEYS[i])
  local code = 0
  local tail = after(raw, 'L|' .. fence .. '|' .. owner .. '|')
  if tail then
    -- tail = <attempts>|<leaseExpiryMs>|<fingerprintBytes>|<fingerprint>
    local attempts, rest = string.match(tail, '^(%d*)|%d*|(.*)$')
    redis.call('SET', KEYS[i], 'D|' .. fence .. '||' .. attempts .. '||' .. rest .. result, 'PX', done_ttl)
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
