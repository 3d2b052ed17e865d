/**
 * A consumer that is not twophase reads relayed messages: the official RabbitMQ Java client sees
 * the staged bytes, the staged headers, and the outbox id as the message id and the
 * `idempotency-key` header.
 */
import { transactionOutbox } from '../../../adapters/postgres';
import { describeWithServices } from '../../support/services';
import { waitFor } from '../../support/wait';
import { AMQP_URL } from '../rabbitmq/support/amqp';
import { describeWithJava, JavaProbe } from '../rabbitmq/support/java-client';
import { OutboxFixture } from './support/outbox-fixture';

describeWithServices(['rabbitmq', 'postgres'], 'outbox: the Java client reads relayed messages', () => {
  describeWithJava('RabbitMQ Java client', () => {
    let java: JavaProbe;
    let f: OutboxFixture;
    beforeAll(async () => {
      java = await JavaProbe.build();
    }, 300_000);
    beforeEach(async () => {
      f = await OutboxFixture.create('outbox_java');
    });
    afterEach(async () => {
      await f.cleanup();
    });

    test('bytes, headers and the id as message id and idempotency-key, as staged', async () => {
      const body = Buffer.from([0x00, 0x01, 0xfe, 0xff, 0x7b]);
      const [id] = await f.inTransaction((c) =>
        transactionOutbox(c, { schema: f.schema }).stageMany([{ to: { exchange: f.exchange, routingKey: 'placed' }, body, headers: { 'x-tenant': 'acme', 'x-unicode': 'grüße' } }]),
      );
      const relay = f.relay();
      await relay.start();
      await waitFor(async () => (await f.rows()).length === 0, { what: 'published' });
      const m = await java.message(AMQP_URL, f.queue);
      expect(m.messageId).toBe(id);
      expect(m.bodyHex).toBe(body.toString('hex'));
      expect(m.headers).toEqual({
        'x-tenant': { t: 'LongString', v: Buffer.from('acme').toString('hex') },
        'x-unicode': { t: 'LongString', v: Buffer.from('grüße').toString('hex') },
        'idempotency-key': { t: 'LongString', v: Buffer.from(id!).toString('hex') },
      });
    });
  });
});
