/**
 * Model-based runs of InMemoryClaimer against the reference claim model, on a fake clock: every
 * expiry is judged exactly, so the model is deterministic (one possible world).
 */
import fc from 'fast-check';
import { InMemoryClaimer } from '../../src';
import { claimCommands, initialModel } from './support/claim-commands';
import { ClaimerDriver } from './support/claimer-driver';

describe('model: InMemoryClaimer (fake clock)', () => {
  test('claim, commit, release, extend, crash and time passing match the reference model', async () => {
    await fc.assert(
      fc.asyncProperty(
        claimCommands({
          keys: ['a', 'b', 'c'],
          leaseTtlsMs: [100, 250, 1000],
          doneTtlsMs: [1000, 3000],
          advancesMs: [1, 99, 100, 150, 249, 250, 1000, 2999],
          maxCommands: 60,
        }),
        async (commands) => {
          let t = 10_000;
          const claimer = new InMemoryClaimer({ clock: { now: () => t }, sweepPerClaim: 2 });
          const setup = () => ({
            model: initialModel({ slackMs: 0 }),
            real: {
              driver: new ClaimerDriver(claimer),
              clock: {
                now: () => t,
                advance: async (ms: number) => {
                  t += ms;
                },
              },
            },
          });
          await fc.asyncModelRun(setup, commands);
        },
      ),
      { numRuns: 300 },
    );
  });

  test('the model stays deterministic on a fake clock (one possible world after every step)', async () => {
    await fc.assert(
      fc.asyncProperty(
        claimCommands({ keys: ['a', 'b'], leaseTtlsMs: [100, 300], doneTtlsMs: [300, 600], advancesMs: [50, 100, 299, 300, 600], maxCommands: 40 }),
        async (commands) => {
          let t = 0;
          const claimer = new InMemoryClaimer({ clock: { now: () => t } });
          const model = initialModel({ slackMs: 0 });
          await fc.asyncModelRun(
            () => ({ model, real: { driver: new ClaimerDriver(claimer), clock: { now: () => t, advance: async (ms: number) => void (t += ms) } } }),
            commands,
          );
          expect(model.worlds.size).toBe(1);
        },
      ),
      { numRuns: 100 },
    );
  });
});
