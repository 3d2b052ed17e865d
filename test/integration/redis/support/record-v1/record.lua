-- Shared by every twophase script (inlined by script-loader.ts at each `--- @include "record"`).
--
-- Record format v1: one Redis string per business key, fields separated by `|`:
--
--   <state>|<fence>|<owner>|<attempts>|<leaseExpiryMs>|<fingerprintBytes>|<fingerprint><result>
--
--   state              L (leased), D (done) or R (released)
--   fence              fencing token of the latest acquisition, decimal integer
--   owner              owner token of the latest acquisition (never contains `|`); empty once D,
--                      where the fence alone identifies the acquisition (fences never repeat for
--                      a key, so a lease whose commit reply was lost still recognises its own
--                      done record: commit, release and extend answer COMMITTED, not LOST)
--   attempts           acquisitions of the key while this record lived, decimal integer
--   leaseExpiryMs      Unix time in ms (Redis server clock, TIME) when the lease ends; empty unless L
--   fingerprintBytes   byte length of the fingerprint; empty when the record has none
--   fingerprint        exactly fingerprintBytes bytes (any byte, `|` included)
--   result             the committed JSON result: every remaining byte; empty when none (JSON is never empty)
--
-- State, fence and owner come first so commit, release and extend recognise their own lease by a
-- prefix comparison. The key's PX is the record's retention: doneTtlMs from the last claim or
-- commit. Lease expiry is the leaseExpiryMs field judged against TIME, so an expired lease that
-- nobody took over is still its owner's (commit and extend work) until a claim takes the key.

-- Integers as plain decimal text: Lua numbers are doubles and Redis would otherwise format large
-- ones in exponent notation. Exact up to 2^53.
local function int(x)
  return string.format('%.0f', x)
end

-- Full decode, for claim: a table {s, f, o, a, e, p, r}, nil for a missing key, or false for a
-- value twophase did not write (a foreign value under our prefix).
local function decode(raw)
  if not raw then return nil end
  local s, f, o, a, e, n, rest = string.match(raw, '^([LDR])|(%d+)|([^|]*)|(%d*)|(%d*)|(%d*)|(.*)$')
  if not s then return false end
  local rec = { s = s, f = f, o = o, a = tonumber(a) or 0, e = tonumber(e) }
  if n ~= '' then
    local len = tonumber(n)
    rec.p = string.sub(rest, 1, len)
    rest = string.sub(rest, len + 1)
  end
  if rest ~= '' then rec.r = rest end
  return rec
end

-- The bytes after `head` when `raw` starts with it, else nil.
local function after(raw, head)
  if raw and string.sub(raw, 1, #head) == head then return string.sub(raw, #head + 1) end
  return nil
end

-- True when `raw` is not a twophase record.
local function foreign(raw)
  return raw and not string.find(raw, '^[LDR]|%d+|')
end

-- Call prologue: reads TIME once. Returns nowUs, nowMs and whether ARGV[1] (the caller's deadline
-- in server Unix ms, 0 = none) has passed; a late call must return before any write.
-- Redis 7 replicates scripts by their effects, so a non-deterministic TIME before writes is
-- allowed (https://redis.io/docs/latest/develop/interact/programmability/eval-intro/#script-replication).
local function begin(not_after_arg)
  local t = redis.call('TIME')
  local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local now_ms = math.floor(now_us / 1000)
  local not_after = tonumber(not_after_arg) or 0
  return now_us, now_ms, (not_after > 0 and now_ms > not_after)
end
