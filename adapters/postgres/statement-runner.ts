/**
 * Helpers shared by both modes: one statement under a deadline on a borrowed client, and the
 * decoding of fingerprint conflicts.
 */
import type { QueryResultRow } from 'pg';
import { type ClaimOptions, ClaimerUnavailableError, KeyConflictError } from '../../src';
import { toClaimerError } from './errors';
import type { BorrowedClient } from './pool-client';

/**
 * One statement on `borrowed` that must answer within `remainingMs`; past it the client
 * is marked broken (destroyed on return) and ClaimerUnavailableError is thrown.
 */
export async function runWithin<R extends QueryResultRow>(borrowed: BorrowedClient, what: string, text: string, values: readonly unknown[] | undefined, remainingMs: number): Promise<R[]> {
  if (remainingMs <= 0) throw new ClaimerUnavailableError(`${what}: deadline passed before sending`);
  if (borrowed.broken !== undefined) throw toClaimerError(borrowed.broken, what);
  try {
    const result = await borrowed.client.query<R>({ text, values: values as unknown[] | undefined, query_timeout: Math.ceil(remainingMs) } as never);
    return result.rows;
  } catch (error) {
    borrowed.noteError(error);
    throw toClaimerError(error, what);
  }
}

export function conflictError(key: string, stored: Buffer | null, options: ClaimOptions): KeyConflictError {
  return new KeyConflictError(key, `sha256:${stored?.toString('hex') ?? ''}`, options.fingerprint ?? '');
}

