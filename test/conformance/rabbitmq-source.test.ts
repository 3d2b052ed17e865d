/**
 * The source conformance suite against RabbitMqSource on the shared broker (127.0.0.1:5672):
 * one fresh queue per test (with its DLX, DLQ and delay queues, all deleted after it).
 */
import { HEADERS, type RabbitMqSource } from '../../adapters/rabbitmq';
import type { MessageSource } from '../../src';
import { Harness, TEST_DELAY_TIERS_MS } from '../integration/rabbitmq/support/harness';
import { describeWithServices } from '../support/services';
import { describeSourceConformance, type ReadDeadLetter } from './source-conformance';

describeWithServices(['rabbitmq'], 'RabbitMqSource conformance on 127.0.0.1:5672', () => {
  describeSourceConformance('RabbitMqSource', async () => {
    const h = new Harness();
    const queue = h.queue('src-conf');
    const dead: ReadDeadLetter[] = [];
    return {
      createSource: () => h.source({ queue }),
      publish: (body) => h.admin.publish('', queue, Buffer.from(body)),
      deadLetters: async () => {
        // Draining takes them off the DLQ: keep what was read for later calls.
        for (const m of await h.admin.drain(`${queue}.dlq`)) {
          dead.push({ body: m.content.toString('utf8'), reason: String(m.properties.headers?.[HEADERS.reason]) });
        }
        return [...dead];
      },
      // Destroys both sockets: the broker requeues the unacknowledged deliveries.
      crash: (source: MessageSource) => (source as RabbitMqSource).destroy(),
      requeueDelayMs: TEST_DELAY_TIERS_MS[1],
      flagsRedelivery: true,
      deliveryTimeoutMs: 10_000,
      cleanup: () => h.cleanup(),
    };
  });
});
