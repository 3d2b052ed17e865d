/**
 * Model-based runs of RedisClaimer on the real Redis (127.0.0.1:6379) against the reference
 * claim model. Redis judges expiry on its own clock, so time passes for real: the model brackets
 * each operation between the local clock readings before the call and after the reply, and keeps
 * every world an expiry inside that bracket allows (see support/claim-model.ts). TTLs are short
 * and runs bounded, so the suite takes a few seconds.
 */
import fc from 'fast-check';
import type Redis from 'ioredis';
import { RedisClaimer } from '../../adapters/redis';
import { describeWithServices } from '../support/services';
import {
  connectRedis,
  deleteMatching,
  REDIS_PROTOCOLS,
  type RespVersion,
  silentLogger,
  sleep,
  uniquePrefix,
} from '../integration/redis/support/redis-helpers';
import { claimCommands, initialModel } from './support/claim-commands';
import { ClaimerDriver } from './support/claimer-driver';

/** Uncertainty around each expiry: ms rounding of Redis TIME and of key expiry against Date.now(). */
const SLACK_MS = 3;

describeWithServices(['redis'], 'model: RedisClaimer on 127.0.0.1:6379 (real time)', () => {
  describe.each(REDIS_PROTOCOLS)('RESP%i', (protocol) => modelSuite(protocol));
});

/** The model runs, once per RESP version (REDIS_PROTOCOLS). */
function modelSuite(protocol: RespVersion): void {
  let client: Redis;
  const prefixes: string[] = [];

  beforeAll(async () => {
    client = await connectRedis(undefined, {}, protocol);
  });
  afterAll(async () => {
    for (const prefix of prefixes) await deleteMatching(client, `${prefix}:*`);
    await client.quit();
  });

  for (const coalesce of [true, false]) {
    test(`claim, commit, release, extend, crash and time passing match the reference model (coalesce ${coalesce})`, async () => {
      const prefix = uniquePrefix('model');
      prefixes.push(prefix);
      const claimer = new RedisClaimer({ redis: client, logger: silentLogger }, { prefix, coalesce });
      await claimer.ready();
      let run = 0;
      await fc.assert(
        fc.asyncProperty(
          claimCommands({ keys: ['a', 'b', '{c}'], leaseTtlsMs: [100, 160], doneTtlsMs: [260, 400], advancesMs: [15, 60, 110], maxCommands: 30 }),
          async (commands) => {
            const driver = new ClaimerDriver(claimer, `run${++run}:`);
            await fc.asyncModelRun(
              () => ({ model: initialModel({ slackMs: SLACK_MS }), real: { driver, clock: { now: () => Date.now(), advance: (ms: number) => sleep(ms) } } }),
              commands,
            );
          },
        ),
        { numRuns: 25 },
      );
      await claimer.close();
    });
  }
}
