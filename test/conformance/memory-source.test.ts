import { MemoryBroker, MemorySource } from '../../adapters/memory';
import type { MessageSource } from '../../src';
import { describeSourceConformance } from './source-conformance';

describeSourceConformance('MemorySource (in-process broker)', async () => {
  const broker = new MemoryBroker();
  const queue = 'conformance.q';
  return {
    createSource: () => new MemorySource({ broker, queue }),
    publish: async (body) => {
      broker.publish(queue, { body });
    },
    deadLetters: async () => broker.deadLetters(queue).map((d) => ({ body: d.message.body.toString('utf8'), reason: String(d.reason.reason) })),
    crash: async (source: MessageSource) => {
      (source as MemorySource).crash();
    },
    requeueDelayMs: 200,
    flagsRedelivery: true,
    deliveryTimeoutMs: 5_000,
    cleanup: async () => broker.close(),
  };
});
