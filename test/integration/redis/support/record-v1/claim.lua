-- claim: tries to acquire a lease on each of n business keys, in order.
--
-- KEYS[i]   (i = 1..n, n ≥ 1) record key `<prefix>:{<escaped business key>}` of the i-th request.
--           On Redis Cluster all n keys must hash to one slot (the caller groups by slot).
-- ARGV[1]   deadline of the call, Unix ms on the Redis server clock; 0 = none. Past it, nothing
--           is written and the call returns {1, nowMs}.
-- Then 4 arguments per key, ARGV[1 + 4(i-1) + 1 .. 4]:
--   owner        owner token of the new lease (no `|`)
--   leaseTtlMs   lease duration, ms
--   retainMs     record retention (the key's PX), ms: the claim's doneTtlMs, ≥ leaseTtlMs
--   fingerprint  '' for none, else '=' followed by the fingerprint
--
-- Returns {0, nowMs, entry_1, ..., entry_n} (nowMs: server Unix ms), each entry one of
--   {1, fence, attempts}   ACQUIRED: the lease is the caller's
--   {2, result | nil}      DONE: committed earlier; the stored JSON result, or nil
--   {3, remainingMs}       BUSY: a live lease of another owner, ending in remainingMs
--   {4, storedFingerprint} CONFLICT: the record holds a different fingerprint; nothing written
--   {5}                    FOREIGN: the key holds a value twophase did not write; nothing written
-- or {1, nowMs} when the deadline in ARGV[1] has passed.
--
-- Fencing: fence = max(previous fence + 1, server time in µs). The first term orders successive
-- acquisitions while the record lives; the second keeps tokens increasing once the record is gone:
-- its retention (≥ leaseTtlMs ≥ 100 ms from the claim that issued the token) has passed, so TIME
-- reads later than that token, unless the server clock went back (see RedisClaimer's docstring).
--- @include "record"

local now_us, now_ms, late = begin(ARGV[1])
if late then return {1, now_ms} end

local now_us_text = int(now_us)
local expiry_ttl, expiry_text = nil, nil
local out = {0, now_ms}
for i = 1, #KEYS do
  local j = 1 + (i - 1) * 4
  local owner, lease_ttl, retain_ms, fp_arg = ARGV[j + 1], ARGV[j + 2], ARGV[j + 3], ARGV[j + 4]
  local fp = nil
  if fp_arg ~= '' then fp = string.sub(fp_arg, 2) end
  if lease_ttl ~= expiry_ttl then
    expiry_ttl, expiry_text = lease_ttl, int(now_ms + tonumber(lease_ttl))
  end
  local raw = redis.call('GET', KEYS[i])
  if not raw then
    -- Fast path, a key never seen (or forgotten): fence = server time in µs.
    local fp_len = ''
    if fp then fp_len = tostring(#fp) end
    redis.call('SET', KEYS[i], 'L|' .. now_us_text .. '|' .. owner .. '|1|' .. expiry_text .. '|' .. fp_len .. '|' .. (fp or ''), 'PX', retain_ms)
    out[i + 2] = {1, now_us, 1}
  else
    local rec = decode(raw)
    if rec == false then
      out[i + 2] = {5}
    elseif fp and rec.p and rec.p ~= fp then
      out[i + 2] = {4, rec.p}
    elseif rec.s == 'D' then
      out[i + 2] = {2, rec.r or false}
    elseif rec.s == 'L' and rec.e and rec.e > now_ms then
      out[i + 2] = {3, rec.e - now_ms}
    else
      -- A released record or an expired lease: take the key over.
      local fence = tonumber(rec.f) + 1
      if now_us > fence then fence = now_us end
      local attempts = rec.a + 1
      local keep_fp = fp or rec.p
      local fp_len = ''
      if keep_fp then fp_len = tostring(#keep_fp) end
      redis.call('SET', KEYS[i], 'L|' .. int(fence) .. '|' .. owner .. '|' .. int(attempts) .. '|' .. expiry_text .. '|' .. fp_len .. '|' .. (keep_fp or ''), 'PX', retain_ms)
      out[i + 2] = {1, fence, attempts}
    end
  end
end
return out
