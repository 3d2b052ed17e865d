/**
 * Bad input through the in-process adapter (MemoryBroker + MemorySource + InMemoryClaimer):
 * fuzzed keys, headers and bodies, mixed with good messages. Each bad message is dead-lettered
 * with its reason and an `InvalidMessageError` type, the handler never sees it, every good one is
 * handled once per key, nothing is lost, and the consumers stay up.
 */
import fc from 'fast-check';
import { MemoryBroker, MemorySource } from '../../adapters/memory';
import { InMemoryClaimer, silentLogger } from '../../src';
import { type FuzzLimits, type FuzzMessage, fuzzMessage, headersOf, IN_PROCESS, labelledReport } from './support/bad-input';
import { checkBatch, FuzzRecorder, type ReadDeadLetter, RecordingConsumer, TRACKING_HEADER } from './support/adapter-fuzz';
import { waitFor } from '../support/wait';

const NAMESPACE = 'fuzz:mem';
const QUEUE = 'fuzz.q';

describe('fuzz: bad input through the in-process adapter', () => {
  let run = 0;
  test('keys, headers and bodies: typed dead-letters with the reason, nothing lost, consumers stay up', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.nat().chain(() => {
          const limits: FuzzLimits = { namespace: NAMESPACE, hugeHeaderBytes: 256 * 1024, hugeBodyBytes: 2 * 1024 * 1024, structuredHeaders: true, runTag: `r${++run}-` };
          return fc.array(fuzzMessage(limits), { minLength: 1, maxLength: 25 });
        }),
        async (messages) => {
          const broker = new MemoryBroker();
          const claimer = new InMemoryClaimer();
          const recorder = new FuzzRecorder();
          const consumers = [0, 1].map(
            () =>
              new RecordingConsumer(
                { name: NAMESPACE, claimer, source: new MemorySource({ broker, queue: QUEUE }), concurrency: 4, deployment: { replicas: 1 }, logger: silentLogger, observers: [recorder.observer] },
                recorder,
              ),
          );
          for (const c of consumers) await c.start();
          const ids = messages.map((_, i) => `m${i}`);
          messages.forEach((m, i) => broker.publish(QUEUE, { body: m.body, headers: headersOf(m, TRACKING_HEADER, ids[i]!), ...(m.messageId === undefined ? {} : { messageId: m.messageId }) }));
          await waitFor(() => broker.isDrained(QUEUE), { timeoutMs: 10_000, what: 'the queue to drain' });
          const deadLetters = new Map<string, ReadDeadLetter[]>();
          for (const d of broker.deadLetters(QUEUE)) {
            const id = String(d.message.headers[TRACKING_HEADER]);
            deadLetters.set(id, [...(deadLetters.get(id) ?? []), { trackingId: id, reason: d.reason.reason as string, errorType: d.reason.errorType as string }]);
          }
          checkBatch(messages, ids, NAMESPACE, IN_PROCESS, recorder, deadLetters);
          expect(broker.stats.acked + broker.stats.rejected).toBe(messages.length);
          for (const c of consumers) expect(c.health()).toMatchObject({ live: true, ready: true, state: 'running' });
          await Promise.all(consumers.map((c) => c.stop()));
          broker.close();
        },
      ),
      { numRuns: 60, ...labelledReport<FuzzMessage[]>() },
    );
  });
});
