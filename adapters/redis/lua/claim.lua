-- claim: tries to acquire a lease on each of n business keys, in order.
--
-- KEYS[i]   (i = 1..n, n ≥ 1) record key `<prefix>:{<escaped business key>}` of the i-th request.
--           On Redis Cluster all n keys must hash to one slot (the caller groups by slot).
-- ARGV[1]   deadline of the call, Unix ms on the Redis server clock; 0 = none. Past it, nothing
--           is written and the call returns {1, nowMs}.
-- ARGV[2]   owner prefix: the part every owner token of this call starts with (no `|`)
-- ARGV[3]   leaseTtlMs: lease duration of every key of the call, ms
-- ARGV[4]   retainMs: record retention (the key's PX) of every key, ms: the claims' doneTtlMs, ≥ leaseTtlMs
-- ARGV[4+i] the i-th key's own part: `<owner suffix>` or `<owner suffix>=<fingerprint>`; the owner
--           token is ARGV[2] .. suffix (the suffix holds no `=` and no `|`; a fingerprint may hold any byte)
-- The caller groups requests by (leaseTtlMs, retainMs), so one argument a key is enough.
--
-- Returns {0, nowMs, nowUs, entry_1, ..., entry_n} (nowMs, nowUs: server Unix time), each entry one of
--   0                      ACQUIRED a key without a record: fence = nowUs, attempt 1 (the common case,
--                          one integer)
--   {1, fence, attempts}   ACQUIRED by taking over a released record or an expired lease
--   {2, result | nil}      DONE: committed earlier; the stored JSON result, or nil
--   {3, remainingMs}       BUSY: a live lease of another owner, ending in remainingMs
--   {4, storedFingerprint} CONFLICT: the record holds a different fingerprint; nothing written
--   {5}                    FOREIGN: the key holds a value twophase did not write; nothing written
-- or {1, nowMs} when the deadline in ARGV[1] has passed.
--
-- A key without a record is written with `SET … NX` directly (one command, no GET first); only
-- when the key exists is it read. The record format is v1 (lua/includes/record.lua), unchanged, so
-- replicas of the previous version read these records and this script reads theirs.
--
-- Fencing: fence = max(previous fence + 1, server time in µs). The first term orders successive
-- acquisitions while the record lives; the second keeps tokens increasing once the record is gone:
-- its retention (≥ leaseTtlMs ≥ 100 ms from the claim that issued the token) has passed, so TIME
-- reads later than that token, unless the server clock went back (see RedisClaimer's docstring).
--- @include "record"

local now_us, now_ms, late = begin(ARGV[1])
if late then return {1, now_ms} end

local now_us_text = int(now_us)
local owner_prefix, retain_ms = ARGV[2], ARGV[4]
local expiry_text = int(now_ms + tonumber(ARGV[3]))
-- Every new record of this call starts the same: state, fence (server µs), then the owner prefix.
local fresh_head = 'L|' .. now_us_text .. '|' .. owner_prefix
local out = {0, now_ms, now_us}
for i = 1, #KEYS do
  local own = ARGV[4 + i]
  local owner, fp = own, nil
  local eq = string.find(own, '=', 1, true)
  if eq then
    owner, fp = string.sub(own, 1, eq - 1), string.sub(own, eq + 1)
  end
  local fp_len = ''
  if fp then fp_len = tostring(#fp) end
  if redis.call('SET', KEYS[i], fresh_head .. owner .. '|1|' .. expiry_text .. '|' .. fp_len .. '|' .. (fp or ''), 'PX', retain_ms, 'NX') then
    -- A key never seen (or forgotten): fence = server time in µs.
    out[i + 3] = 0
  else
    local rec = decode(redis.call('GET', KEYS[i]))
    if not rec then
      -- false: a string twophase did not write. (nil cannot happen: SET NX found the key, and keys
      -- do not expire while a script runs. A key of another type made GET raise WRONGTYPE.)
      out[i + 3] = {5}
    elseif fp and rec.p and rec.p ~= fp then
      out[i + 3] = {4, rec.p}
    elseif rec.s == 'D' then
      out[i + 3] = {2, rec.r or false}
    elseif rec.s == 'L' and rec.e and rec.e > now_ms then
      out[i + 3] = {3, rec.e - now_ms}
    else
      -- A released record or an expired lease: take the key over.
      local fence = tonumber(rec.f) + 1
      if now_us > fence then fence = now_us end
      local attempts = rec.a + 1
      local keep_fp = fp or rec.p
      local keep_len = ''
      if keep_fp then keep_len = tostring(#keep_fp) end
      redis.call('SET', KEYS[i], 'L|' .. int(fence) .. '|' .. owner_prefix .. owner .. '|' .. int(attempts) .. '|' .. expiry_text .. '|' .. keep_len .. '|' .. (keep_fp or ''), 'PX', retain_ms)
      out[i + 3] = {1, fence, attempts}
    end
  end
end
return out
