/**
 * Keys of `runOnce`: a caller's key scoped by the operation, the tenant and the actor, so the same
 * caller key in two scopes names two claims.
 */
import { ConfigurationError } from '../util/errors';
import { checkKnownOptions, describeType, optionNames } from '../util/known-options';
import { RUN_ONCE_NAMESPACE, validateKey } from '../claim/keys';

/** Where a `runOnce` key belongs. Keys of two different scopes never meet. */
export interface RunOnceScope {
  /**
   * What is being done: an HTTP route (`POST /payments`) or a job type (`send-invoices`).
   * Required, non-empty.
   */
  readonly operation: string;
  /** The tenant the key belongs to, when tenants share the claim store. Non-empty when given. */
  readonly tenant?: string;
  /** Who sent the key (a user or an API client): two clients may pick the same key. Non-empty when given. */
  readonly actor?: string;
}

/**
 * The start of every `runOnce` key. A consumer's keys start with its escaped name and `:`, and
 * the name `run-once` is refused for consumers, so no message key reaches this namespace.
 */
export const RUN_ONCE_KEY_PREFIX = `${RUN_ONCE_NAMESPACE}:`;

const SCOPE_NAMES = optionNames<RunOnceScope>()(['operation', 'tenant', 'actor']);

/**
 * The claim key of `key` in `scope`:
 * `run-once:<operation>:<tenant>:<actor>:<key>`, where the three scope parts have `\` and `:`
 * escaped (`\\`, `\:`) and an absent tenant or actor is empty. Three escaped parts, then the key
 * as is: two different (scope, key) pairs never give the same string.
 *
 * No consumer shares this namespace: a consumer named `run-once` is refused (ConfigurationError).
 * @throws ConfigurationError when the scope is not an object, has an unknown field, or a part is
 *   not a non-empty string
 * @throws InvalidKeyError when `key` is empty or the whole key is not a valid claim key (at most
 *   512 bytes: digest long keys with `digestKey`)
 */
export function runOnceKey(scope: RunOnceScope, key: string): string {
  if (!scope || typeof scope !== 'object') throw new ConfigurationError(`scope must be an object { operation, tenant?, actor? }, got ${describeType(scope)}`);
  checkKnownOptions('runOnce scope', scope, SCOPE_NAMES);
  const operation = part('operation', scope.operation, true);
  const tenant = part('tenant', scope.tenant, false);
  const actor = part('actor', scope.actor, false);
  if (typeof key !== 'string' || key.length === 0) validateKey(key);
  const scoped = `${RUN_ONCE_KEY_PREFIX}${operation}:${tenant}:${actor}:${key}`;
  validateKey(scoped);
  return scoped;
}

function part(field: string, value: unknown, required: boolean): string {
  if (value === undefined && !required) return '';
  if (typeof value !== 'string' || value.length === 0) {
    throw new ConfigurationError(`scope.${field} must be a non-empty string${required ? '' : ' when given'}, got ${describeType(value)}`);
  }
  return value.replace(/\\/g, '\\\\').replace(/:/g, '\\:');
}
