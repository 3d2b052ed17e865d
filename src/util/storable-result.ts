/**
 * Whether a value survives being stored as JSON and read back as the same value, checked before
 * it is encoded: `JSON.stringify` throws on a BigInt or a cycle with a message that names neither
 * the place nor the fix, silently drops a function or symbol, empties a Map or Set, and writes
 * NaN, Infinity and -Infinity as null.
 */
import { UnstorableResultError } from './errors';

/**
 * Checks that `value` can be stored as JSON without loss.
 * @param root how the value is named in the error (`result`)
 * @throws UnstorableResultError naming the path (`result.amount`) and the problem
 */
export function assertStorable(value: unknown, root = 'result'): void {
  visit(value, root, []);
}

function visit(value: unknown, path: string, ancestors: object[]): void {
  switch (typeof value) {
    case 'bigint':
      throw new UnstorableResultError(path, 'is a bigint, which JSON cannot hold');
    case 'function':
    case 'symbol':
      throw new UnstorableResultError(path, `is a ${typeof value}, which JSON drops`);
    case 'number':
      assertFinite(value, path);
      return;
    case 'object':
      break;
    default:
      return;
  }
  if (value === null) return;
  if (value instanceof Number) return assertFinite(value.valueOf(), path); // JSON writes a Number object as its number
  if (typeof (value as { toJSON?: unknown }).toJSON === 'function') return; // Date and the like: JSON asks the value itself
  const at = ancestors.indexOf(value);
  if (at >= 0) throw new UnstorableResultError(path, `refers back to ${pathOf(at, path)} (a cycle), which JSON cannot hold`);
  if (value instanceof Map || value instanceof Set) throw new UnstorableResultError(path, `is a ${value instanceof Map ? 'Map' : 'Set'}, which JSON stores as {}`);
  ancestors.push(value);
  if (Array.isArray(value)) value.forEach((item, i) => visit(item, `${path}[${i}]`, ancestors));
  else for (const [name, item] of Object.entries(value)) if (item !== undefined) visit(item, `${path}.${name}`, ancestors);
  ancestors.pop();
}

/** The path of the ancestor at `index`: a prefix of `path` with as many steps. */
function pathOf(index: number, path: string): string {
  const steps = path.match(/^[^.[]+|\.[^.[]+|\[\d+\]/g) ?? [path];
  return steps.slice(0, index + 1).join('');
}

/** NaN, Infinity and -Infinity: `JSON.stringify` writes each as null, so a replay would differ. */
function assertFinite(value: number, path: string): void {
  if (!Number.isFinite(value)) {
    throw new UnstorableResultError(path, `is ${String(value)}, which JSON cannot hold (it would be stored as null); return a finite number, null, or the value as a string`);
  }
}
