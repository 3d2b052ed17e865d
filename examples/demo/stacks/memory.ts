/**
 * The embedded default: the in-process broker and the in-memory claimer. No services needed.
 */
import { InMemoryClaimer, MemoryBroker, MemorySource } from '../../../adapters/memory';
import type { CrashableSource, DemoMessage, DemoStack } from '../stack';

const QUEUE = 'demo.payments';

export function memoryStack(): DemoStack {
  const broker = new MemoryBroker();
  return {
    label: 'in-process broker + InMemoryClaimer',
    claimer: new InMemoryClaimer(),
    replicas: 1,
    makeSource(): CrashableSource {
      return new MemorySource({ broker, queue: QUEUE });
    },
    async publish(messages: readonly DemoMessage[]) {
      for (const m of messages) {
        broker.publish(QUEUE, { body: m.body, headers: m.key === undefined ? {} : { 'idempotency-key': m.key } });
      }
    },
    async waiting() {
      return broker.depth(QUEUE) + broker.pending(QUEUE);
    },
    async deadLetters() {
      return broker.deadLetters(QUEUE).map((d) => ({
        key: d.message.headers['idempotency-key'] as string | undefined,
        reason: String(d.reason.reason),
      }));
    },
    async close() {
      broker.close();
    },
  };
}
