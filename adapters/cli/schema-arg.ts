/**
 * `--schema`, checked while the command line is parsed: a name twophase refuses (a `$`, over 63
 * bytes, empty) is a usage error (exit code 2) named before any connection is tried.
 */
import { InvalidArgumentError } from 'commander';
import { ConfigurationError } from '../../src';
import { checkIdentifier } from '../postgres/identifier-rules';

/** commander's argument parser for `--schema <schema>`. @throws InvalidArgumentError naming the rule broken */
export function schemaArgument(value: string): string {
  try {
    checkIdentifier('--schema', value);
  } catch (error) {
    if (error instanceof ConfigurationError) throw new InvalidArgumentError(error.message);
    throw error;
  }
  return value;
}
