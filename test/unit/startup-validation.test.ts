import { DeploymentValidationError, InMemoryClaimer, validateDeployment } from '../../src';
import { FnConsumer, fastOptions } from './helpers';

describe('startup validation (fail closed)', () => {
  test('in_memory with one replica, or none declared outside production, passes', () => {
    expect(() => validateDeployment('in_memory', { replicas: 1 }, {})).not.toThrow();
    expect(() => validateDeployment('in_memory', undefined, { NODE_ENV: 'development' })).not.toThrow();
    expect(() => validateDeployment('distributed', { replicas: 12 }, { NODE_ENV: 'production' })).not.toThrow();
  });

  test('in_memory with several replicas fails and says what to do', () => {
    expect(() => validateDeployment('in_memory', { replicas: 3 }, {})).toThrow(DeploymentValidationError);
    expect(() => validateDeployment('in_memory', { replicas: 3 }, {})).toThrow(/wire the Redis claimer.*or declare a single replica/);
  });

  test('the TWOPHASE_REPLICAS environment variable overrides the declaration', () => {
    expect(() => validateDeployment('in_memory', { replicas: 1 }, { TWOPHASE_REPLICAS: '4' })).toThrow(/across 4 replicas/);
    expect(() => validateDeployment('in_memory', { replicas: 4 }, { TWOPHASE_REPLICAS: '1' })).not.toThrow();
    expect(() => validateDeployment('distributed', undefined, { TWOPHASE_REPLICAS: 'many' })).toThrow(/TWOPHASE_REPLICAS="many" is not a positive integer/);
    for (const loose of ['0x3', '2 ', '1e0', '1.0']) expect(() => validateDeployment('distributed', undefined, { TWOPHASE_REPLICAS: loose })).toThrow(/is not a positive integer/);
  });

  test('an unknown kind fails', () => {
    expect(() => validateDeployment('noop', { replicas: 1 }, {})).toThrow(/claimer kind "noop" is unknown/);
    expect(() => validateDeployment(undefined, undefined, {})).toThrow(DeploymentValidationError);
  });

  test('in_memory with no declaration in production fails', () => {
    expect(() => validateDeployment('in_memory', undefined, { NODE_ENV: 'production' })).toThrow(/in production needs an explicit deployment declaration/);
  });

  test('every problem is listed at once', () => {
    try {
      validateDeployment('mystery', { replicas: 0 }, {});
      throw new Error('expected a DeploymentValidationError');
    } catch (error) {
      expect(error).toBeInstanceOf(DeploymentValidationError);
      expect((error as DeploymentValidationError).problems).toHaveLength(2);
    }
  });

  test('start() runs the check before consuming: the source is never started', async () => {
    const { ManualSource } = await import('./helpers');
    const source = new ManualSource();
    const fake = { kind: 'eventually_consistent', claim: async () => ({}) } as never;
    const consumer = new FnConsumer({ ...fastOptions(fake), source, deployment: { replicas: 1 } }, async () => ({ type: 'ack' }));
    await expect(consumer.start()).rejects.toBeInstanceOf(DeploymentValidationError);
    expect(source.started).toBe(false);
  });

  test('the in-memory claimer reports its own kind', () => {
    expect(new InMemoryClaimer().kind).toBe('in_memory');
  });
});
