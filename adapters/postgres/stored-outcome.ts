/**
 * The `outcome` column of a completed key (jsonb): `{"result": …}`, or `{}` without a result.
 *
 * jsonb keeps an object's keys in its own order (shorter keys first, then by bytes), not in the
 * order they were written, so `{"zeta":1,"a":2}` reads back as `{"a":2,"zeta":1}` and a replayed
 * HTTP body would differ from the first answer. When the result holds an object whose keys jsonb
 * would reorder, the outcome also carries the result's JSON text verbatim as a string,
 * `result_text`, which a read prefers. `result` stays beside it, so SQL over the column, the
 * `kept` checks of the statements and a reader of an older twophase version see the same value
 * as before. Rows written before (no `result_text`) read back as they always did.
 *
 * The stored outcome is bounded to 4096 bytes (the statements drop a longer one). The text is
 * added only when the whole outcome, as jsonb prints it, still fits: otherwise the row is written
 * as before (the values kept, the key order jsonb's).
 */
import type { JsonValue } from '../../src';

/** The stored outcome's bound, in bytes of its jsonb text (the statements' CASE and the CHECK). */
const OUTCOME_MAX_BYTES = 4096;

/** The outcome JSON text of a commit with the result's JSON text `resultJson` (or none). */
export function outcomeJson(resultJson: string | undefined): string {
  if (resultJson === undefined) return '{}';
  const plain = `{"result":${resultJson}}`;
  // Two keys need a comma between them: a text without one has no order to lose.
  if (!resultJson.includes(',')) return plain;
  const value = JSON.parse(resultJson) as JsonValue;
  if (!reordersKeys(value)) return plain;
  const withText = `{"result":${resultJson},"result_text":${JSON.stringify(resultJson)}}`;
  // jsonb prints `{"result": …, "result_text": "…"}`: the value as jsonb prints it, the text escaped.
  const printedBytes = jsonbTextBytes(value) + Buffer.byteLength(JSON.stringify(resultJson)) + '{"result": , "result_text": }'.length;
  return printedBytes <= OUTCOME_MAX_BYTES ? withText : plain;
}

/** The result inside a stored outcome: its verbatim text when kept, else `result`; or undefined. */
export function storedResult(outcome: { result?: unknown; result_text?: unknown } | null): JsonValue | undefined {
  if (!outcome) return undefined;
  if (typeof outcome.result_text === 'string') {
    try {
      return JSON.parse(outcome.result_text) as JsonValue;
    } catch {
      // Not written by twophase: the value beside it is the stored result.
    }
  }
  return Object.prototype.hasOwnProperty.call(outcome, 'result') ? (outcome.result as JsonValue) : undefined;
}

/** True when some object in `value` has its keys in another order than jsonb keeps them. */
function reordersKeys(value: JsonValue): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (Array.isArray(value)) return value.some(reordersKeys);
  const keys = Object.keys(value);
  for (let i = 1; i < keys.length; i++) if (jsonbKeyOrder(keys[i - 1]!, keys[i]!) > 0) return true;
  return keys.some((k) => reordersKeys(value[k] as JsonValue));
}

/** jsonb's key order: shorter first (in bytes), then by bytes. */
function jsonbKeyOrder(a: string, b: string): number {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length !== y.length ? x.length - y.length : Buffer.compare(x, y);
}

/**
 * An upper bound of the bytes of `value` as jsonb prints it: `", "` and `": "` between items, a
 * number in exponent form written out in full (at most 330 digits for a double).
 */
function jsonbTextBytes(value: JsonValue): number {
  if (value === null || typeof value === 'boolean') return String(value).length;
  if (typeof value === 'number') return /e/i.test(String(value)) ? 330 : String(value).length;
  if (typeof value === 'string') return Buffer.byteLength(JSON.stringify(value));
  if (Array.isArray(value)) return 2 + value.reduce<number>((n, item, i) => n + jsonbTextBytes(item) + (i > 0 ? 2 : 0), 0);
  const entries = Object.entries(value).filter(([, item]) => item !== undefined);
  return 2 + entries.reduce((n, [k, item], i) => n + Buffer.byteLength(JSON.stringify(k)) + 2 + jsonbTextBytes(item as JsonValue) + (i > 0 ? 2 : 0), 0);
}
