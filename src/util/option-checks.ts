/**
 * The checks every options object shares: one validator per kind of value, so every option error
 * reads the same way and names the value with its type (`got '10' (a string)`, never `got 10`,
 * which reads like a range problem). Claimers and sources use them through twophase/adapter-kit.
 */
import { ConfigurationError } from './errors';
import { describeType } from './known-options';

/**
 * Checks that `value` is an integer in [min, max] (`max` Infinity: no upper bound) and returns it.
 *
 * @param field - the option's name as the user wrote it (`publishTimeoutMs`, `deployment.replicas`)
 * @param unit - printed after "integer number of" when given (`ms`, `milliseconds`, `seconds`)
 * @throws ConfigurationError naming the field, the range and the value with its type
 */
export function checkInteger(field: string, value: unknown, min: number, max: number, unit?: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    const what = unit === undefined ? 'an integer' : `an integer number of ${unit}`;
    const range = max === Infinity ? `≥ ${min}` : `in [${min}, ${max}]`;
    throw new ConfigurationError(`${field} must be ${what} ${range}, got ${describeType(value)}`);
  }
  return value;
}

/**
 * Checks that `value` is a boolean and returns it.
 * @throws ConfigurationError naming the field and the value with its type
 */
export function checkBoolean(field: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw new ConfigurationError(`${field} must be a boolean, got ${describeType(value)}`);
  return value;
}

/**
 * Checks that `value` is a number in [0, 1] (a jitter or a ratio) and returns it.
 * @throws ConfigurationError naming the field and the value with its type
 */
export function checkFraction(field: string, value: unknown): number {
  if (typeof value !== 'number' || !(value >= 0 && value <= 1)) throw new ConfigurationError(`${field} must be in [0, 1], got ${describeType(value)}`);
  return value;
}
