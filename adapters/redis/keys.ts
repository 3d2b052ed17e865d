/**
 * Diagnosis of one stored key: reads the claimer's record (format v1, `lua/includes/record.lua`)
 * and says what a delivery of the key would meet. Read-only: one `MULTI` of `TIME`, `GET` and
 * `PTTL`, so the record, its retention and the server clock are read at one instant. Nothing is
 * written, so it is safe to run against a live claimer, as often as wanted.
 *
 * Redis deletes a record itself when its retention (the key's PX) ends, so an expired key reads
 * as `missing`: there is nothing to purge.
 */
import type { Cluster, Redis } from 'ioredis';
import { ClaimerUnavailableError, type JsonValue } from '../../src';
import { DEFAULT_PREFIX, recordKey, validatePrefix } from './key-layout';

/**
 * What {@link diagnoseRedisKey} found. Stable JSON: new fields may be added, none renamed. The
 * states shared with the PostgreSQL claimer's diagnosis keep its names and fields.
 * - `missing`: no record (never claimed, or its retention ended and Redis deleted it).
 * - `in_progress`: a live lease; a delivery meets `busy` for `leaseLeftMs`.
 * - `lease_expired`: the lease ended with no commit or release; the next claim takes the key over.
 * - `replayable`: committed; a delivery meets `done` with `result` (absent when none was stored).
 * - `released`: released by its owner; the next claim acquires it. `attempt` 0: the attempt
 *   count was reset (a dead-letter), so the next claim is attempt 1.
 * - `fingerprint_conflict`: `--fingerprint` given and the record holds another one; a claim with
 *   it fails with `KeyConflictError`.
 * - `foreign`: the Redis key holds a value twophase did not write (a prefix shared with other data).
 *
 * Fencing tokens are decimal strings; `retentionLeftMs` is the key's PTTL (-1: no expiry).
 */
export type RedisKeyDiagnosis =
  | { readonly state: 'missing'; readonly key: string; readonly redisKey: string }
  | { readonly state: 'in_progress'; readonly key: string; readonly redisKey: string; readonly owner: string; readonly fencingToken: string; readonly attempt: number; readonly leaseLeftMs: number; readonly retentionLeftMs: number }
  | { readonly state: 'lease_expired'; readonly key: string; readonly redisKey: string; readonly owner: string; readonly fencingToken: string; readonly attempt: number; readonly expiredMsAgo: number; readonly retentionLeftMs: number }
  | { readonly state: 'replayable'; readonly key: string; readonly redisKey: string; readonly result?: JsonValue; readonly fencingToken: string; readonly attempt: number; readonly retentionLeftMs: number }
  | { readonly state: 'released'; readonly key: string; readonly redisKey: string; readonly owner: string; readonly fencingToken: string; readonly attempt: number; readonly retentionLeftMs: number }
  | { readonly state: 'fingerprint_conflict'; readonly key: string; readonly redisKey: string; readonly storedFingerprint: string; readonly givenFingerprint: string }
  | { readonly state: 'foreign'; readonly key: string; readonly redisKey: string };

export interface RedisDiagnoseOptions {
  /** The full key as claimed (with the consumer's namespace, e.g. `payments:order-7`). */
  readonly key: string;
  /** The claimer's `prefix` option. Default `twophase`. */
  readonly prefix?: string;
  /** A fingerprint to compare with the stored one. */
  readonly fingerprint?: string;
}

/** A record, decoded. Byte fields stay Buffers until they are known to be text. */
interface DecodedRecord {
  readonly state: 'L' | 'D' | 'R';
  readonly fence: string;
  readonly owner: string;
  readonly attempts: number;
  readonly leaseExpiryMs: number | undefined;
  readonly fingerprint: Buffer | undefined;
  readonly result: Buffer | undefined;
}

const PIPE = 0x7c;

/**
 * Decodes a record of format v1 (`<state>|<fence>|<owner>|<attempts>|<leaseExpiryMs>|<fpBytes>|<fp><result>`),
 * or returns undefined for a value twophase did not write.
 */
export function decodeRecord(raw: Buffer): DecodedRecord | undefined {
  const fields: string[] = [];
  let start = 0;
  for (let i = 0; i < 6; i++) {
    const end = raw.indexOf(PIPE, start);
    if (end === -1) return undefined;
    fields.push(raw.toString('utf8', start, end));
    start = end + 1;
  }
  const [state, fence, owner, attempts, expiry, fpBytes] = fields as [string, string, string, string, string, string];
  if (!/^[LDR]$/.test(state) || !/^\d+$/.test(fence) || !/^\d*$/.test(attempts) || !/^\d*$/.test(expiry) || !/^\d*$/.test(fpBytes)) return undefined;
  const fpLength = fpBytes === '' ? undefined : Number(fpBytes);
  if (fpLength !== undefined && start + fpLength > raw.length) return undefined;
  const fingerprint = fpLength === undefined ? undefined : raw.subarray(start, start + fpLength);
  const rest = raw.subarray(start + (fpLength ?? 0));
  return {
    state: state as DecodedRecord['state'],
    fence,
    owner,
    attempts: attempts === '' ? 0 : Number(attempts),
    leaseExpiryMs: expiry === '' ? undefined : Number(expiry),
    fingerprint,
    result: rest.length > 0 ? rest : undefined,
  };
}

/**
 * Reads one key's record and says what a delivery of it would meet. The lease is judged against
 * the Redis server clock (`TIME`), as the claim script judges it.
 * @throws ConfigurationError for an invalid prefix
 * @throws ClaimerUnavailableError when Redis fails or answers unexpectedly
 */
export async function diagnoseRedisKey(client: Redis | Cluster, options: RedisDiagnoseOptions): Promise<RedisKeyDiagnosis> {
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  validatePrefix('prefix', prefix);
  const { key } = options;
  const redisKey = recordKey(prefix, key);
  let replies: Array<[Error | null, unknown]> | null;
  try {
    replies = await client.multi().time().getBuffer(redisKey).pttl(redisKey).exec();
  } catch (error) {
    throw new ClaimerUnavailableError(`diagnose of "${key}": ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  const [time, get, pttl] = replies ?? [];
  if (!time || time[0] || !get || !pttl || pttl[0]) {
    const failure = time?.[0] ?? pttl?.[0];
    throw new ClaimerUnavailableError(`diagnose of "${key}": unexpected reply ${failure ? failure.message : JSON.stringify(replies)}`);
  }
  // GET fails with WRONGTYPE when the key holds a hash, list, …: not ours.
  if (get[0]) return { state: 'foreign', key, redisKey };
  if (get[1] === null) return { state: 'missing', key, redisKey };
  const record = decodeRecord(get[1] as Buffer);
  if (!record) return { state: 'foreign', key, redisKey };
  const [seconds, micros] = (time[1] as [string, string]).map(Number) as [number, number];
  const nowMs = seconds * 1000 + Math.floor(micros / 1000);
  const retentionLeftMs = Number(pttl[1]);

  if (options.fingerprint !== undefined && record.fingerprint && !record.fingerprint.equals(Buffer.from(options.fingerprint, 'utf8'))) {
    return { state: 'fingerprint_conflict', key, redisKey, storedFingerprint: record.fingerprint.toString('utf8'), givenFingerprint: options.fingerprint };
  }
  const fencingToken = record.fence;
  const attempt = record.attempts;
  switch (record.state) {
    case 'L': {
      const leftMs = (record.leaseExpiryMs ?? 0) - nowMs;
      return leftMs > 0
        ? { state: 'in_progress', key, redisKey, owner: record.owner, fencingToken, attempt, leaseLeftMs: leftMs, retentionLeftMs }
        : { state: 'lease_expired', key, redisKey, owner: record.owner, fencingToken, attempt, expiredMsAgo: -leftMs, retentionLeftMs };
    }
    case 'D': {
      let result: JsonValue | undefined;
      if (record.result) {
        try {
          result = JSON.parse(record.result.toString('utf8')) as JsonValue;
        } catch {
          return { state: 'foreign', key, redisKey };
        }
      }
      return { state: 'replayable', key, redisKey, ...(result === undefined ? {} : { result }), fencingToken, attempt, retentionLeftMs };
    }
    case 'R':
      return { state: 'released', key, redisKey, owner: record.owner, fencingToken, attempt, retentionLeftMs };
  }
}
