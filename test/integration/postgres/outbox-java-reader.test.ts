/**
 * A relayed message read by the official RabbitMQ Java client (`com.rabbitmq:amqp-client`): the
 * body bytes and headers exactly as staged, the outbox id as the AMQP message id and as the
 * `idempotency-key` header, the staged properties. A non-twophase consumer deduplicates by that id.
 */
import { stageOutbox } from '../../../adapters/postgres';
import { describeWithServices } from '../../support/services';
import { AMQP_URL } from '../rabbitmq/support/amqp';
import { describeWithJava, JavaProbe } from '../rabbitmq/support/java-client';
import { OutboxFixture } from './support/outbox-fixture';

describeWithServices(['rabbitmq', 'postgres'], 'transactional outbox: a Java consumer reads relayed messages', () => {
  describeWithJava('official RabbitMQ Java client', () => {
    let f: OutboxFixture;
    let java: JavaProbe;
    beforeAll(async () => {
      java = await JavaProbe.build();
    }, 300_000);
    beforeEach(async () => {
      f = await OutboxFixture.create('outbox_java');
    });
    afterEach(async () => {
      await f.cleanup();
    });

    test('body bytes, headers and properties as staged; message id and idempotency-key = the outbox id', async () => {
      // Every byte value, a non-UTF-8 sequence and a NUL: the body is bytes, not text.
      const body = Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), Buffer.from([0xc3, 0x28, 0x00])]);
      const headers = { 'x-tenant': 'tenant-ü', traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', 'x-empty': '' };
      const [id] = await f.inTransaction((c) =>
        stageOutbox(c, { to: { exchange: f.exchange, routingKey: 'placed' }, body, headers, properties: { contentType: 'application/octet-stream', type: 'order.placed', correlationId: 'corr-7' } }, { schema: f.schema }),
      );
      const publisher = f.rabbit();
      await publisher.start();
      try {
        const cycle = await f.relay({ publisher }).relayOnce();
        expect(cycle.published).toBe(1);
      } finally {
        await publisher.close();
      }
      const m = await java.message(AMQP_URL, f.queue);
      expect(m.body).toBe(body.toString('hex'));
      expect(m.messageId).toBe(id);
      expect(m.headers).toEqual({
        'x-tenant': { t: 'LongString', v: Buffer.from('tenant-ü').toString('hex') },
        traceparent: { t: 'LongString', v: Buffer.from(headers.traceparent).toString('hex') },
        'x-empty': { t: 'LongString', v: '' },
        'idempotency-key': { t: 'LongString', v: Buffer.from(id!).toString('hex') },
      });
      expect(m).toMatchObject({ contentType: 'application/octet-stream', type: 'order.placed', correlationId: 'corr-7', deliveryMode: 2 });
    });
  });
});
