import { InMemoryClaimer } from '../../src';
import { describeClaimerConformance } from './claimer-conformance';

describeClaimerConformance('InMemoryClaimer (fake clock)', async () => {
  let t = 1_000;
  const claimer = new InMemoryClaimer({ clock: { now: () => t } });
  return {
    claimer,
    leaseTtlMs: 1_000,
    advance: async (ms) => {
      t += ms;
    },
    cleanup: async () => undefined,
  };
});

describeClaimerConformance('InMemoryClaimer (real monotonic clock)', async () => ({
  claimer: new InMemoryClaimer(),
  leaseTtlMs: 150,
  advance: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  cleanup: async () => undefined,
}));

test('InMemoryClaimer reports its own kind: in_memory', () => {
  expect(new InMemoryClaimer().kind).toBe('in_memory');
});
