import { InMemoryClaimer, type InMemoryClaimerOptions } from '../../src';
import { type LeaseIdentity, type LeaseOutcome } from '../../src/adapter-kit';
import { type ClaimerCapabilities, type ClaimerFactory, describeClaimerConformance } from './claimer-conformance';
import { describeRunOnceConformance } from './run-once-conformance';
import { ReplyFaults } from './reply-faults';

/** The in-memory claimer with its store primitives wrapped: they act, then may lose their reply. */
class ReplyDroppingClaimer extends InMemoryClaimer {
  readonly faults = new ReplyFaults();
  constructor(options?: InMemoryClaimerOptions) {
    super(options);
  }
  protected override commitLease(lease: LeaseIdentity, resultJson: string | undefined, doneTtlMs: number): LeaseOutcome {
    const outcome = super.commitLease(lease, resultJson, doneTtlMs);
    this.faults.after('commit');
    return outcome;
  }
  protected override releaseLease(lease: LeaseIdentity, resetAttempts: boolean, uncountAttempt?: boolean): LeaseOutcome {
    const outcome = super.releaseLease(lease, resetAttempts, uncountAttempt);
    this.faults.after('release');
    return outcome;
  }
}

const capabilities: ClaimerCapabilities = { claimMany: true, commitMany: true, transactional: false };

const fakeClock: ClaimerFactory = async () => {
  let t = 1_000;
  const claimer = new ReplyDroppingClaimer({ clock: { now: () => t } });
  return {
    claimer,
    leaseTtlMs: 1_000,
    advance: async (ms) => {
      t += ms;
    },
    dropNextReply: (operation) => claimer.faults.dropNext(operation),
    cleanup: async () => undefined,
  };
};

describeClaimerConformance('InMemoryClaimer (fake clock)', fakeClock, capabilities);
describeRunOnceConformance('InMemoryClaimer (fake clock)', fakeClock);

describeClaimerConformance('InMemoryClaimer (real monotonic clock)', async () => {
  const claimer = new ReplyDroppingClaimer();
  return {
    claimer,
    leaseTtlMs: 150,
    advance: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    dropNextReply: (operation) => claimer.faults.dropNext(operation),
    cleanup: async () => undefined,
  };
}, capabilities);

test('InMemoryClaimer reports its own kind: in_memory', () => {
  expect(new InMemoryClaimer().kind).toBe('in_memory');
});
