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
--   1 OK       the key is now done (also when this same lease already committed it: a repeat)
--   0 LOST     the record belongs to another acquisition, was released, or is gone
--   5 FOREIGN  the key holds a value twophase did not write
-- A lease that expired but was not taken over is still the owner's: it commits (OK).
-- The done record drops the owner token and the lease expiry; the fence identifies the acquisition.
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
    code = 1
  elseif foreign(raw) then
    code = 5
  end
  out[i + 2] = code
end
return out
