/**
 * Issue #12 item 8 on the real broker, with the official RabbitMQ Java client as publisher and
 * reader: the copies twophase publishes (a delay tier, the dead-letter copy, the replayed copy)
 * carry every header the Java client wrote, with the type and value it had, wherever amqplib can
 * carry them; where it cannot, the test pins down exactly what arrives (docs/rabbitmq.md,
 * "Foreign headers on copies"). No `twophase-publish-id` header reaches a reader.
 */
import { PermanentError } from '../../../src';
import { HEADERS } from '../../../adapters/rabbitmq';
import { EXIT, runCli } from '../../../adapters/cli';
import { describeWithServices } from '../../support/services';
import { AMQP_URL } from './support/amqp';
import { Harness } from './support/harness';
import { describeWithJava, JavaProbe, type JavaValue } from './support/java-client';
import { waitFor } from '../../support/wait';

/** Headers amqplib decodes to a value it encodes again with the same type and value. */
const EXACT = ['idempotency-key', 'double', 'int', 'short', 'byte', 'bytes', 'string', 'timestamp', 'decimal', 'bool', 'void'] as const;

/**
 * Headers amqplib cannot carry exactly, as a Java reader sees them on every copy. amqplib decodes
 * all numeric field types to a JavaScript number (the type is lost, and a long beyond 2^53 is
 * rounded) and sends a number back as the smallest signed integer type that holds it, or a
 * double; it decodes a long string as UTF-8 text (invalid bytes become U+FFFD).
 */
const LOSSY: Record<string, JavaValue> = {
  float: { t: 'Byte', v: '1' },
  'float-fraction': { t: 'Double', v: '1.5' },
  'long-max': { t: 'Double', v: '9.223372036854776E18' },
  'long-2p53-plus-1': { t: 'Long', v: '9007199254740992' },
  'long-small': { t: 'Byte', v: '5' },
  'int-small': { t: 'Byte', v: '7' },
  'long-string-not-utf8': { t: 'LongString', v: 'efbfbdefbfbd41' },
  nested: {
    t: 'Table',
    v: {
      int: { t: 'Integer', v: '100000' },
      long: { t: 'Long', v: '9007199254740992' },
      list: {
        t: 'Array',
        v: [
          { t: 'Short', v: '1000' },
          { t: 'LongString', v: '78' },
          { t: 'Boolean', v: 'true' },
          { t: 'bytes', v: '0102' },
          { t: 'Table', v: { float: { t: 'Double', v: '2.5' } } },
          { t: 'Double', v: '9.223372036854776E18' },
        ],
      },
    },
  },
};

describeWithServices(['rabbitmq'], 'RabbitMQ: foreign headers on copies, read back with the Java client', () => {
  describeWithJava('Java client', () => {
    let java: JavaProbe;
    let h: Harness;
    beforeAll(async () => {
      java = await JavaProbe.build();
    }, 300_000);
    beforeEach(() => {
      h = new Harness();
    });
    afterEach(async () => {
      await h.cleanup();
    });

    test('Java publish → retry through a delay tier → dead-letter copy → replay: each copy keeps what amqplib can carry, the rest as documented', async () => {
      const queue = h.queue('javahdr');
      // Declare the topology, then publish from Java and read the original as Java sees it.
      const declaring = h.consumer({ source: h.source({ queue }), claimer: h.claimer('memory') }, async () => {
        throw new Error('not yet');
      });
      await declaring.start();
      await declaring.stop();
      await java.publish(AMQP_URL, queue, 'java-1');
      const original = await java.peek(AMQP_URL, queue);
      expect(Object.keys(original).sort()).toEqual([...EXACT, ...Object.keys(LOSSY)].sort());

      // First attempt fails (a retry through the 100 ms delay queue), the second for good.
      const delivered: Record<string, unknown>[] = [];
      const consumer = h.consumer(
        { source: h.source({ queue }), claimer: h.claimer('memory'), maxAttempts: 3, retryBackoff: { initialDelayMs: 100, maxDelayMs: 100, jitter: 0 } },
        async (m, ctx) => {
          delivered.push({ ...m.headers });
          if (ctx.attempt === 1) throw new Error('transient');
          throw new PermanentError('poison');
        },
      );
      await consumer.start();
      await waitFor(async () => (await h.admin.messageCount(`${queue}.dlq`)) === 1, { what: 'dead-letter copy' });
      await consumer.stop();
      expect(delivered).toHaveLength(2);
      for (const headers of delivered) expect(headers).not.toHaveProperty(HEADERS.publishId);

      const dead = await java.peek(AMQP_URL, `${queue}.dlq`);
      for (const name of EXACT) expect([name, dead[name]]).toEqual([name, original[name]]);
      for (const [name, value] of Object.entries(LOSSY)) expect([name, dead[name]]).toEqual([name, value]);
      expect(dead[HEADERS.reason]).toEqual({ t: 'LongString', v: Buffer.from('permanent_error').toString('hex') });
      expect(dead[HEADERS.attempts]).toEqual({ t: 'Byte', v: '2' });
      expect(dead).not.toHaveProperty(HEADERS.publishId);

      // Replay to the work queue (no consumer now) and read the replayed copy from Java.
      const code = await runCli(['dlq', 'replay', `${queue}.dlq`, '--url', AMQP_URL], { io: { stdout: () => undefined, stderr: () => undefined } });
      expect(code).toBe(EXIT.ok);
      const replayed = await java.take(AMQP_URL, queue);
      for (const name of EXACT) expect([name, replayed[name]]).toEqual([name, original[name]]);
      for (const [name, value] of Object.entries(LOSSY)) expect([name, replayed[name]]).toEqual([name, value]);
      expect(replayed[HEADERS.replayCount]).toEqual({ t: 'Byte', v: '1' });
      for (const name of [HEADERS.publishId, HEADERS.replayId, HEADERS.reason, HEADERS.attempts, 'x-death']) expect(replayed).not.toHaveProperty(name);
    });
  });
});
