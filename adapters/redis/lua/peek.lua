-- peek: reads the state of each of n business keys, writing nothing (runOnce asks before it
-- claims, so a call it refuses never takes the lease).
--
-- KEYS[i]   (i = 1..n, n ≥ 1) record key of the i-th key; one slot on Redis Cluster.
-- ARGV[1]   deadline of the call, Unix ms on the Redis server clock; 0 = none (see claim.lua).
-- ARGV[1+i] unused (one argument a key, as every script of the claimer takes).
--
-- Returns {0, nowMs, entry_1, ..., entry_n}, or {1, nowMs} when the deadline has passed, each
-- entry {state, attempts}:
--   0 ABSENT   no record, or a released record whose count was reset: a claim is attempt 1
--   1 DONE     committed
--   2 BUSY     a live lease
--   3 FAILED   released keeping its count, or a lease that ended without a commit: a claim is
--              attempt attempts + 1
--   5 FOREIGN  the key holds a value twophase did not write
--- @include "record"

local _, now_ms, late = begin(ARGV[1])
if late then return {1, now_ms} end

local out = {0, now_ms}
for i = 1, #KEYS do
  local rec = decode(redis.call('GET', KEYS[i]))
  if rec == nil then
    out[i + 2] = {0, 0}
  elseif rec == false then
    out[i + 2] = {5, 0}
  elseif rec.s == 'D' then
    out[i + 2] = {1, rec.a}
  elseif rec.s == 'L' and rec.e and rec.e > now_ms then
    out[i + 2] = {2, rec.a}
  elseif rec.a > 0 then
    out[i + 2] = {3, rec.a}
  else
    out[i + 2] = {0, 0}
  end
end
return out
