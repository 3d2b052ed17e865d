/**
 * `maxBodyBytes` on the real broker: a body larger than the limit is dead-lettered without being
 * parsed (reason `invalid_body`, the sizes in the error text, a log line), before any claim; a
 * body at the limit is handled.
 */
import { ack } from '../../../src';
import { HEADERS } from '../../../adapters/rabbitmq';
import { describeWithServices } from '../../support/services';
import { EffectLog, Harness } from './support/harness';
import { waitFor } from '../../support/wait';

describeWithServices(['rabbitmq'], 'RabbitMQ: maxBodyBytes (real broker)', () => {
  let h: Harness;
  beforeEach(() => {
    h = new Harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  test('a body over maxBodyBytes is dead-lettered unparsed with reason invalid_body and a log line; one at the limit is handled', async () => {
    const queue = h.queue('body-limit');
    const effects = new EffectLog();
    const source = h.source({ queue });
    const consumer = h.consumer({ source, claimer: h.claimer('memory'), maxBodyBytes: 1024 }, async (m) => {
      effects.apply(m.key);
      return ack();
    });
    await consumer.start();
    // Not JSON at all: a parse would say "Unexpected token", the limit says why it was not parsed.
    await h.admin.publish('', queue, Buffer.from('x'.repeat(1025)), { messageId: 'big' });
    const fits = Buffer.from(JSON.stringify({ pad: 'y'.repeat(1024 - 10) }));
    expect(fits.length).toBe(1024);
    await h.admin.publish('', queue, fits, { messageId: 'fits' });
    await waitFor(async () => (await h.admin.messageCount(`${queue}.dlq`)) === 1 && effects.total === 1, { what: 'one dead-lettered, one handled' });
    const [dead] = await h.admin.drain(`${queue}.dlq`);
    expect(dead!.properties.messageId).toBe('big');
    expect(dead!.properties.headers).toMatchObject({ [HEADERS.reason]: 'invalid_body', [HEADERS.errorMessage]: 'body is 1025 bytes, more than maxBodyBytes (1024); not parsed' });
    expect(dead!.content.length).toBe(1025);
    expect(effects.count('test:fits')).toBe(1);
    const line = h.logger.lines.find((l) => l.msg === 'twophase: message dead-lettered (invalid_body)');
    expect(line?.level).toBe('warn');
    expect(String((line?.obj as { err?: Error }).err?.message)).toMatch(/more than maxBodyBytes \(1024\); not parsed/);
  });
});
