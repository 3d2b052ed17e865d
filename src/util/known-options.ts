/**
 * Refusal of unknown option names. From JavaScript (or from TypeScript when the object is not a
 * literal), a misspelled option is otherwise ignored and its default used silently: `concurency`,
 * `leaseTTLMs`, `deployment: { replica: 3 }`. Every public constructor checks its options with
 * {@link checkKnownOptions}, nested option objects included.
 */
import { ConfigurationError } from './errors';

/**
 * Throws when `options` has an own enumerable property not in `known`, naming the field and the
 * closest known name. `undefined` or `null` options pass (the caller applies its defaults).
 *
 * @param where - what the options configure, printed first (`RedisClaimer options`, `deployment`)
 * @param options - the caller's options object, not modified
 * @param known - every accepted name
 * @param hints - for names users are known to try, what to do instead (printed in place of a closest name)
 * @throws ConfigurationError for options that are not an object, or for the first unknown name
 */
export function checkKnownOptions(where: string, options: unknown, known: readonly string[], hints: Readonly<Record<string, string>> = {}): void {
  if (options === undefined || options === null) return;
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw new ConfigurationError(`${where} must be an object, got ${describeType(options)}`);
  }
  // An instance passed where the options object belongs (`new MemorySource(broker, 'q')`) would
  // otherwise be reported by its private field names.
  const className = instanceClassName(options);
  if (className !== undefined) {
    throw new ConfigurationError(`${where} must be a plain options object, got an instance of ${className}; known options: ${known.join(', ')}`);
  }
  for (const name of Object.keys(options)) {
    if (known.includes(name)) continue;
    const closest = closestName(name, known);
    const hint = Object.hasOwn(hints, name) ? ` (${hints[name]})` : closest === undefined ? '' : ` (did you mean "${closest}"?)`;
    throw new ConfigurationError(`${where}: unknown option "${name}"${hint}; known options: ${known.join(', ')}`);
  }
}

/**
 * The known name nearest to `name` by edit distance (case-insensitive, adjacent swaps count as
 * one edit), or undefined when none is near enough to be a plausible misspelling (more edits than
 * half the longer name).
 */
export function closestName(name: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  const lower = name.toLowerCase();
  for (const candidate of known) {
    const c = candidate.toLowerCase();
    // A name that contains a known one or is contained by it (`prefetch` → `prefetchCount`) counts as near.
    const distance = c.includes(lower) || lower.includes(c) ? Math.abs(c.length - lower.length) / 4 : editDistance(lower, c);
    if (distance < bestDistance) {
      bestDistance = distance;
      best = candidate;
    }
  }
  if (best === undefined || bestDistance > Math.max(name.length, best.length) / 2) return undefined;
  return best;
}

/** Optimal string alignment distance: insertions, deletions, substitutions and adjacent swaps. */
export function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[] = new Array<number>(rows * cols).fill(0);
  for (let i = 0; i < rows; i++) d[i * cols] = i;
  for (let j = 0; j < cols; j++) d[j] = j;
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[(i - 1) * cols + j]! + 1, d[i * cols + j - 1]! + 1, d[(i - 1) * cols + j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[(i - 2) * cols + j - 2]! + 1);
      d[i * cols + j] = v;
    }
  }
  return d[rows * cols - 1]!;
}

/**
 * `'3' (a string)`, `null`, `[1] (an array)`, `the class X itself`: a value with its JavaScript
 * type, for error messages. A URL's password is replaced by `***`; a function's source is never
 * printed.
 */
export function describeType(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (Array.isArray(value)) return `${withoutPasswords(JSON.stringify(value)).slice(0, 60)} (an array)`;
  if (typeof value === 'string') return `'${withoutPasswords(value).slice(0, 80)}' (a string)`;
  if (typeof value === 'object') return `an object`;
  if (typeof value === 'function') {
    const name = value.name || 'anonymous';
    return /^class\b/.test(Function.prototype.toString.call(value)) ? `the class ${name} itself: construct it, new ${name}(…)` : `a function (${name})`;
  }
  return `${String(value)} (a ${typeof value})`;
}

/** `scheme://user:***@host…`: every `//user:password@` in `text` with its password hidden. */
export function withoutPasswords(text: string): string {
  // The password runs to the last `@` before the path, so an unescaped `@` in it is hidden too.
  return text.replace(/\/\/([^:@/\s]*):[^/\s]*@/g, '//$1:***@');
}

/**
 * Lists the option names of `T` for {@link checkKnownOptions}, checked at compile time in both
 * directions: a name `T` lacks is a type error, and so is an option of `T` left out of the list
 * (so adding an option without listing it fails the build instead of refusing the new option).
 *
 * @example const NAMES = optionNames<RedisClaimerOptions>()(['redis', 'keyPrefix']);
 */
export function optionNames<T>() {
  return <const K extends readonly (keyof T & string)[]>(
    names: K & ([Exclude<keyof T, K[number]>] extends [never] ? unknown : { readonly missingOptionNames: Exclude<keyof T, K[number]> }),
  ): readonly string[] => names;
}

/** The class name of an object built by a class other than Object, else undefined (plain objects, null-prototype objects). */
export function instanceClassName(value: object): string | undefined {
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto === null || proto === Object.prototype) return undefined;
  const ctor = (proto as { constructor?: unknown }).constructor;
  const name = typeof ctor === 'function' ? ctor.name : '';
  // Another realm's Object (a vm context) is still a plain object.
  return name === 'Object' ? undefined : name || 'an anonymous class';
}
