/**
 * The chaos harness's stack registry and profiles (test/chaos, docs/chaos.md): every registered
 * stack has both scenarios, the PostgreSQL inbox stacks are judged strictly in both and get the
 * session fault, their gated variants add the gate's faults (a private Redis killed, paused and
 * flushed), and a strict verdict counts every duplicated effect as unexplained.
 */
import { judgedStrictly, profile, STACKS } from '../chaos/profiles';
import { STRICT_FAULTS } from '../chaos/schedule';
import { STACK_SPECS, stackSpec } from '../chaos/stacks/registry';
import { judge } from '../chaos/verdict';

describe('chaos stacks', () => {
  test('every registered stack has a strict and a full scenario in both profiles (the outbox stacks: one full scenario)', () => {
    expect(STACKS).toEqual(STACK_SPECS.map((s) => s.name));
    for (const stack of STACKS) {
      const expected = stackSpec(stack).outbox ? ['full'] : ['strict', 'full'];
      for (const name of ['ci', 'long'] as const) expect(profile(name, stack).map((s) => s.name)).toEqual(expected);
    }
    expect(STACKS.filter((stack) => stackSpec(stack).outbox)).toEqual(['rabbitmq-outbox', 'kafka-outbox']);
  });

  test('the PostgreSQL inbox stacks: strict verdict, pg_terminate in the full scenario, no Redis faults, ≥ 100,000 keys in the long profile', () => {
    for (const stack of ['rabbitmq-postgres', 'kafka-postgres'] as const) {
      expect(stackSpec(stack)).toMatchObject({ store: 'postgres', strictVerdict: true });
      const [strict, full] = profile('ci', stack);
      expect(Object.keys(strict!.faultsPerMinute).every((k) => STRICT_FAULTS.has(k as never))).toBe(true);
      expect(full!.faultsPerMinute).toMatchObject({ pg_terminate: expect.any(Number), kill_after_effect: expect.any(Number), overrun: expect.any(Number) });
      expect(full!.faultsPerMinute.redis_stop).toBeUndefined();
      expect(profile('long', stack).reduce((n, s) => n + s.messages, 0)).toBeGreaterThanOrEqual(100_000);
    }
    expect(profile('ci', 'kafka-postgres')[0]!.faultsPerMinute).toMatchObject({ group_leave: expect.any(Number), group_join: expect.any(Number) });
    expect(profile('ci', 'rabbitmq-postgres')[0]!.faultsPerMinute).toMatchObject({ close_connections: expect.any(Number) });
  });

  test('the gated stacks: the inbox with a Redis gate, strict verdict, the gate faults and the session fault, a short CI scenario', () => {
    for (const stack of ['rabbitmq-postgres-gated', 'kafka-postgres-gated'] as const) {
      expect(stackSpec(stack)).toMatchObject({ store: 'gated', strictVerdict: true });
      const [strict, full] = profile('ci', stack);
      expect(Object.keys(strict!.faultsPerMinute).every((k) => STRICT_FAULTS.has(k as never))).toBe(true);
      expect(full!.faultsPerMinute).toMatchObject({
        redis_stop: expect.any(Number),
        redis_pause: expect.any(Number),
        redis_flush: expect.any(Number),
        pg_terminate: expect.any(Number),
        kill_after_effect: expect.any(Number),
        overrun: expect.any(Number),
      });
      expect(full!.concurrency).toBe(8);
      // Pauses near 2 s: well past the gate's 200 ms deadline, short enough for a 20 s scenario.
      expect(full!.outageMs[1]).toBeLessThanOrEqual(2500);
      // Shorter than the ungated stack's CI scenario (the CI budget), as long in the long profile.
      const ungated = stack.replace('-gated', '') as 'rabbitmq-postgres' | 'kafka-postgres';
      expect(full!.publishMs).toBeLessThan(profile('ci', ungated)[1]!.publishMs);
      expect(profile('long', stack).reduce((n, s) => n + s.messages, 0)).toBeGreaterThanOrEqual(100_000);
      expect(judgedStrictly(stack, 'full', ['redis_flush', 'redis_stop', 'kill_after_effect'])).toBe(true);
    }
  });

  test('which runs are judged strictly: the inbox stacks always; the others in a strict scenario with only strict faults', () => {
    expect(judgedStrictly('rabbitmq-postgres', 'full', ['kill', 'kill_after_effect', 'pg_terminate', 'overrun'])).toBe(true);
    expect(judgedStrictly('kafka-postgres', 'strict', ['group_leave'])).toBe(true);
    expect(judgedStrictly('rabbitmq-redis', 'full', ['kill'])).toBe(false);
    expect(judgedStrictly('rabbitmq-redis', 'strict', ['kill_before_effect', 'close_connections'])).toBe(true);
    expect(judgedStrictly('kafka-redis', 'strict', ['redis_stop'])).toBe(false);
  });

  test('a strict verdict fails on a duplicate that a kill would otherwise explain', () => {
    const input = {
      published: ['k1'],
      effects: [
        { key: 'k1', fence: 1, worker: 'w1' },
        { key: 'k1', fence: 2, worker: 'w2' },
      ],
      markers: [{ key: 'k1', fence: 2 }],
      outcomes: [],
      killedWorkers: new Set(['w1']),
      deadLettered: new Map<string, string[]>(),
      allowedDeadLetterReasons: new Set(['permanent_error']),
      storeFaults: false,
    };
    expect(judge({ ...input, strict: false })).toMatchObject({ ok: true, explained: { killed_before_commit: 1 } });
    expect(judge({ ...input, strict: true })).toMatchObject({ ok: false, unexplained: [{ key: 'k1', fence: 1, cause: 'strict_run' }] });
  });
});
