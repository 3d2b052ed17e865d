/**
 * A backoff option given in part (`Partial<BackoffPolicy>`): unknown field names refused, the
 * missing fields taken from the defaults. Used by the consumer's `retryBackoff` and `claimBackoff`
 * and by the outbox relay's `retryBackoff`; each caller then checks the values' ranges.
 */
import { checkKnownOptions, optionNames } from '../util/known-options';
import type { BackoffPolicy } from '../util/retry';

/** The field names of {@link BackoffPolicy}. */
export const BACKOFF_OPTION_NAMES: readonly string[] = optionNames<BackoffPolicy>()(['initialDelayMs', 'maxDelayMs', 'multiplier', 'jitter']);

/**
 * `given` over `defaults` into a new object: fields of `given` that are `undefined` (and a
 * `given` that is `undefined` or `null`) keep the default. The values are not range-checked.
 *
 * @param where - the option's name, printed in the error (`retryBackoff`)
 * @throws ConfigurationError when `given` is not an object or has a field not in {@link BackoffPolicy}
 */
export function resolveBackoffOption(where: string, given: Partial<BackoffPolicy> | undefined, defaults: Readonly<BackoffPolicy>): BackoffPolicy {
  checkKnownOptions(where, given, BACKOFF_OPTION_NAMES);
  const out: Record<string, unknown> = { ...defaults };
  for (const [k, v] of Object.entries(given ?? {})) if (v !== undefined) out[k] = v;
  return out as unknown as BackoffPolicy;
}
