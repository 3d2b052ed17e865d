/**
 * Encoding of the optional JSON result stored with a commit, bounded in bytes.
 */
import { ResultTooLargeError, UnstorableResultError } from '../util/errors';
import { assertStorable } from '../util/storable-result';
import type { JsonValue } from './claimer';

/**
 * Serialises a commit result to JSON and checks its size, before anything is written.
 * Returns undefined when `result` is undefined (nothing stored).
 * @throws ResultTooLargeError when the UTF-8 JSON is longer than `maxBytes`
 * @throws UnstorableResultError naming the path (`result.amount`) when the value cannot be
 *   serialised to JSON (a bigint, a cycle; a function or symbol at the top)
 */
export function encodeResult(result: JsonValue | undefined, maxBytes: number): string | undefined {
  if (result === undefined) return undefined;
  let json: string | undefined;
  try {
    json = JSON.stringify(result);
  } catch {
    // Off the fast path: find the place and the problem to name.
    assertStorable(result);
    throw new UnstorableResultError('result', 'is not serialisable to JSON');
  }
  if (json === undefined) {
    assertStorable(result);
    throw new UnstorableResultError('result', 'is not a JSON value');
  }
  const size = Buffer.byteLength(json, 'utf8');
  if (size > maxBytes) throw new ResultTooLargeError(size, maxBytes);
  return json;
}

/** Parses a stored result; undefined stays undefined. */
export function decodeResult(json: string | undefined | null): JsonValue | undefined {
  if (json === undefined || json === null || json === '') return undefined;
  return JSON.parse(json) as JsonValue;
}
