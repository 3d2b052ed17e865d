/**
 * The integer return codes of the Lua scripts (documented in each `lua/*.lua` header) and their
 * meaning on the TypeScript side, in one place. Nothing else in the adapter reads a raw code.
 */
import { ClaimerUnavailableError, ConfigurationError, KeyConflictError } from '../../src';
import { type LeaseOutcome, type KeyPeek } from '../../src/adapter-kit';

/** First element of every script reply. */
export const CALL_STATUS = {
  /** The script ran; per-key entries follow the server time. */
  RAN: 0,
  /** The caller's deadline (ARGV[1]) had passed at the server: nothing was written. */
  DEADLINE_PASSED: 1,
} as const;

/**
 * A claim entry that is this bare integer: the key had no record and is now leased, with fence =
 * the call's server time in µs and attempt 1 (the common case, sent as one integer).
 */
export const CLAIM_FRESH = 0;

/** First element of a claim entry (an array). */
export const CLAIM_CODE = {
  ACQUIRED: 1,
  DONE: 2,
  BUSY: 3,
  CONFLICT: 4,
  FOREIGN: 5,
} as const;

/** A commit, release or extend entry. */
export const LEASE_CODE = {
  LOST: 0,
  OK: 1,
  /** The key is done by this same lease (its own commit landed, perhaps with its reply lost). */
  COMMITTED: 2,
  /** This same lease released the key earlier and nobody claimed it since. */
  RELEASED: 3,
  FOREIGN: 5,
} as const;

/** A script call's reply, split: the server time and one raw entry per key. */
export interface CallReply {
  /** Redis server time when the script ran, Unix ms. */
  readonly serverNowMs: number;
  /** The same in µs (claim replies only; 0 otherwise): the fence of a {@link CLAIM_FRESH} entry. */
  readonly serverNowUs: number;
  readonly entries: readonly unknown[];
}

/** One claim entry, decoded. */
export type ClaimEntry =
  | { readonly code: typeof CLAIM_CODE.ACQUIRED; readonly fencingToken: number; readonly attempt: number }
  | { readonly code: typeof CLAIM_CODE.DONE; readonly resultJson: string | undefined }
  | { readonly code: typeof CLAIM_CODE.BUSY; readonly remainingMs: number };

/**
 * Splits a script reply: `{status, nowMs, entries…}`, and for claim `{status, nowMs, nowUs,
 * entries…}` (see the `lua/*.lua` headers). Check {@link isDeadlinePassed} first: a
 * `DEADLINE_PASSED` reply carries only the status and the server time.
 * @throws ClaimerUnavailableError when the reply is malformed
 */
export function parseCallReply(reply: unknown, script: string): CallReply {
  if (!Array.isArray(reply) || reply.length < 2 || typeof reply[1] !== 'number') {
    throw new ClaimerUnavailableError(`unexpected reply from the ${script} script: ${JSON.stringify(reply)?.slice(0, 200)}`);
  }
  if (script !== 'claim' || reply[0] !== CALL_STATUS.RAN) return { serverNowMs: reply[1], serverNowUs: 0, entries: reply.slice(2) };
  if (typeof reply[2] !== 'number') {
    throw new ClaimerUnavailableError(`unexpected reply from the claim script: ${JSON.stringify(reply)?.slice(0, 200)}`);
  }
  return { serverNowMs: reply[1], serverNowUs: reply[2], entries: reply.slice(3) };
}

/** True when the reply says the deadline passed before the script ran. */
export function isDeadlinePassed(reply: unknown): boolean {
  return Array.isArray(reply) && reply[0] === CALL_STATUS.DEADLINE_PASSED;
}

/**
 * Decodes one claim entry.
 * @param serverNowUs the call's server time in µs ({@link CallReply.serverNowUs}): the fence of a
 *   {@link CLAIM_FRESH} entry
 * @throws KeyConflictError for CONFLICT (the stored fingerprint differs from `givenFingerprint`)
 * @throws ConfigurationError for FOREIGN (the key holds a value twophase did not write)
 * @throws ClaimerUnavailableError for anything else (a reply this version does not know)
 */
export function decodeClaimEntry(entry: unknown, key: string, givenFingerprint: string | undefined, serverNowUs: number): ClaimEntry {
  if (entry === CLAIM_FRESH && serverNowUs > 0) return { code: CLAIM_CODE.ACQUIRED, fencingToken: serverNowUs, attempt: 1 };
  const [code, a, b] = Array.isArray(entry) ? (entry as unknown[]) : [entry];
  switch (code) {
    case CLAIM_CODE.ACQUIRED:
      return { code, fencingToken: Number(a), attempt: Number(b) };
    case CLAIM_CODE.DONE:
      return { code, resultJson: typeof a === 'string' ? a : undefined };
    case CLAIM_CODE.BUSY:
      return { code, remainingMs: Number(a) };
    case CLAIM_CODE.CONFLICT:
      throw new KeyConflictError(key, String(a), givenFingerprint ?? '');
    case CLAIM_CODE.FOREIGN:
      throw foreign(key);
    default:
      throw new ClaimerUnavailableError(`unexpected claim entry for "${key}": ${JSON.stringify(entry)}`);
  }
}

/**
 * Decodes one commit, release or extend entry.
 * @throws ConfigurationError for FOREIGN
 * @throws ClaimerUnavailableError for an unknown code
 */
export function decodeLeaseEntry(entry: unknown, key: string): LeaseOutcome {
  switch (entry) {
    case LEASE_CODE.OK:
      return 'ok';
    case LEASE_CODE.COMMITTED:
      return 'committed';
    case LEASE_CODE.RELEASED:
      return 'released';
    case LEASE_CODE.LOST:
      return 'lost';
    case LEASE_CODE.FOREIGN:
      throw foreign(key);
    default:
      throw new ClaimerUnavailableError(`unexpected lease entry for "${key}": ${JSON.stringify(entry)}`);
  }
}

function foreign(key: string): ConfigurationError {
  return new ConfigurationError(
    `the Redis key of "${key}" holds a value twophase did not write; choose a prefix no other data uses`,
  );
}

/** States of a peek entry (see lua/peek.lua), by code. */
const PEEK_STATES: Readonly<Record<number, KeyPeek['state']>> = { 0: 'absent', 1: 'done', 2: 'busy', 3: 'failed' };

/**
 * Decodes one peek entry `{state, attempts}`.
 * @throws ConfigurationError for FOREIGN (the key holds a value twophase did not write)
 * @throws ClaimerUnavailableError for anything else this version does not know
 */
export function decodePeekEntry(entry: unknown, key: string): KeyPeek {
  if (Array.isArray(entry) && typeof entry[0] === 'number' && typeof entry[1] === 'number') {
    if (entry[0] === CLAIM_CODE.FOREIGN) throw foreign(key);
    const state = PEEK_STATES[entry[0]];
    if (state !== undefined) return { state, attempts: entry[1] };
  }
  throw new ClaimerUnavailableError(`unexpected peek reply for "${key}": ${JSON.stringify(entry)?.slice(0, 200)}`);
}
