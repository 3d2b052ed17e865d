/**
 * Fail-closed startup checks of a claimer against the declared deployment.
 */
import type { ClaimerKind } from '../claim/claimer';
import { DeploymentValidationError } from '../util/errors';

/** How the consumer is deployed. */
export interface DeploymentDeclaration {
  /**
   * Number of processes (replicas, pods) running this consumer against the same queue or
   * consumer group. Overridden by the `TWOPHASE_REPLICAS` environment variable.
   */
  readonly replicas?: number;
}

/** Name of the environment variable that overrides `deployment.replicas`. */
export const REPLICAS_ENV = 'TWOPHASE_REPLICAS';

/**
 * Checks that `kind` is fit for `deployment`. Problems found, all reported at once:
 * - an unknown claimer kind;
 * - an `in_memory` claimer with more than one replica (each replica would keep its own claims);
 * - an `in_memory` claimer with no replica declaration when NODE_ENV is `production`;
 * - a replica count that is not a positive integer.
 * @throws DeploymentValidationError listing every problem and what to do
 */
export function validateDeployment(
  kind: unknown,
  deployment: DeploymentDeclaration | undefined,
  env: Readonly<Record<string, string | undefined>> = process.env,
): void {
  const problems: string[] = [];
  const fromEnv = env[REPLICAS_ENV];
  let replicas = deployment?.replicas;
  if (fromEnv !== undefined && fromEnv !== '') {
    replicas = /^[0-9]+$/.test(fromEnv) ? Number(fromEnv) : Number.NaN;
    if (!Number.isInteger(replicas) || replicas < 1) {
      problems.push(`${REPLICAS_ENV}="${fromEnv}" is not a positive integer`);
    }
  } else if (replicas !== undefined && (!Number.isInteger(replicas) || replicas < 1)) {
    problems.push(`deployment.replicas=${String(replicas)} is not a positive integer`);
  }
  const known: readonly ClaimerKind[] = ['in_memory', 'distributed'];
  if (!known.includes(kind as ClaimerKind)) {
    problems.push(
      `claimer kind ${JSON.stringify(kind)} is unknown (expected "in_memory" or "distributed"); ` +
        'use a claimer from twophase or twophase/redis, or report the kind from your implementation',
    );
  }
  if (kind === 'in_memory') {
    if (replicas !== undefined && Number.isInteger(replicas) && replicas > 1) {
      problems.push(
        `an in_memory claimer cannot deduplicate across ${replicas} replicas: wire the Redis claimer ` +
          `(twophase/redis), or declare a single replica (deployment: { replicas: 1 } or ${REPLICAS_ENV}=1)`,
      );
    }
    if (replicas === undefined && env.NODE_ENV === 'production') {
      problems.push(
        'an in_memory claimer in production needs an explicit deployment declaration: wire the Redis claimer ' +
          `(twophase/redis), or declare a single replica (deployment: { replicas: 1 } or ${REPLICAS_ENV}=1)`,
      );
    }
  }
  if (problems.length > 0) throw new DeploymentValidationError(problems);
}
