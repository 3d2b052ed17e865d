/**
 * Bad input through the real RabbitMQ adapter (127.0.0.1:5672) with the Redis claimer
 * (127.0.0.1:6379): fuzzed keys, headers and bodies published raw with amqplib (no publisher
 * helper to tidy them), consumed by two RabbitMqSource consumers. Each bad message is
 * dead-lettered to `<queue>.dlq` with `twophase-reason` and `twophase-error-type:
 * InvalidMessageError`, the handler never sees it, each good key is handled once, nothing is lost,
 * and both consumers stay up.
 *
 * AMQP limits shape the generators: amqplib encodes all headers of a message into one
 * 65 536-byte buffer, so no publisher can send more than about 65.5 KB of headers; "huge"
 * headers here stay well under it (at most 40 KB per message), and separate tests publish 40 KB
 * and then just under the limit.
 */
import amqp, { type ChannelModel, type ConfirmChannel } from 'amqplib';
import fc from 'fast-check';
import Redis from 'ioredis';
import { RabbitMqSource } from '../../adapters/rabbitmq';
import { RedisClaimer } from '../../adapters/redis';
import { silentLogger } from '../../src';
import { describeWithServices, SERVICES } from '../support/services';
import { type FuzzLimits, fuzzMessage, headersOf, labelledReport, type FuzzMessage, type HeaderValue, type Transport } from './support/bad-input';
import { checkBatch, FuzzRecorder, type ReadDeadLetter, RecordingConsumer, TRACKING_HEADER, trackingIdOf } from './support/adapter-fuzz';
import { waitFor } from '../support/wait';

const AMQP_URL = process.env.TWOPHASE_AMQP_URL ?? `amqp://guest:guest@${SERVICES.rabbitmq.host}:${SERVICES.rabbitmq.port}`;
const NAMESPACE = 'fuzz:rmq';
/**
 * Header bytes close to the most amqplib can publish: its content-header buffer is 65 536 bytes
 * (measured: a header table of 65 518 bytes of values publishes, a larger one does not).
 */
const NEAR_LIMIT_HEADER_BYTES = 65_400;

/** How AMQP 0-9-1 (amqplib's field-table codec) carries the header values the generators make. */
const AMQP: Transport = {
  // Strings travel as UTF-8 longstr: a lone surrogate becomes U+FFFD. Buffers stay byte arrays;
  // numbers, booleans, tables and arrays keep their types; a void field arrives as null.
  header: (v: HeaderValue) => (typeof v === 'string' ? Buffer.from(v, 'utf8').toString('utf8') : v),
  messageId: (v) => (v === undefined || v.length === 0 ? undefined : v),
};

describeWithServices(['rabbitmq', 'redis'], 'fuzz: bad input through the RabbitMQ adapter (Redis claimer)', () => {
  const queue = `tp-fuzz.${Date.now().toString(36)}.${Math.floor(Math.random() * 1e6)}`;
  const prefix = `tp-fuzz-${Date.now().toString(36)}`;
  const recorder = new FuzzRecorder();
  const deadLetters = new Map<string, ReadDeadLetter[]>();
  let admin: ChannelModel;
  let channel: ConfirmChannel;
  let redis: Redis;
  let consumers: RecordingConsumer[] = [];
  let batch = 0;

  const publish = (m: FuzzMessage, id: string) =>
    new Promise<void>((resolve, reject) => {
      channel.sendToQueue(queue, m.body, { headers: headersOf(m, TRACKING_HEADER, id), ...(m.messageId === undefined ? {} : { messageId: m.messageId }) }, (err) => (err ? reject(err) : resolve()));
    });

  /** Moves every message of the DLQ into `deadLetters`, by tracking id. */
  const readDlq = async () => {
    for (;;) {
      const m = await channel.get(`${queue}.dlq`, { noAck: true });
      if (!m) return;
      const headers = m.properties.headers ?? {};
      const id = trackingIdOf(headers) ?? '?';
      const text = (v: unknown) => (typeof v === 'string' ? v : Buffer.isBuffer(v) ? v.toString('utf8') : undefined);
      deadLetters.set(id, [...(deadLetters.get(id) ?? []), { trackingId: id, reason: text(headers['twophase-reason']), errorType: text(headers['twophase-error-type']) }]);
    }
  };

  const runBatch = async (messages: readonly FuzzMessage[], dlqTimeoutMs = 10_000) => {
    const b = ++batch;
    const ids = messages.map((_, i) => `b${b}-${i}`);
    for (let i = 0; i < messages.length; i++) await publish(messages[i]!, ids[i]!);
    await waitFor(() => recorder.settled(ids), { timeoutMs: 20_000, what: `batch ${b} to settle` });
    await waitFor(async () => {
        await readDlq();
        return ids.every((id) => (recorder.finals.get(id) ?? []).filter((r) => r.action === 'reject').length === (deadLetters.get(id)?.length ?? 0));
      }, { timeoutMs: dlqTimeoutMs, what: `the dead letters of batch ${b}` });
    checkBatch(messages, ids, NAMESPACE, AMQP, recorder, deadLetters);
    for (const c of consumers) expect(c.health()).toMatchObject({ live: true, ready: true, state: 'running' });
  };

  beforeAll(async () => {
    admin = await amqp.connect(AMQP_URL, { clientProperties: { connection_name: 'twophase-fuzz-publisher' } });
    admin.on('error', () => undefined);
    channel = await admin.createConfirmChannel();
    redis = new Redis({ host: SERVICES.redis.host, port: SERVICES.redis.port, maxRetriesPerRequest: 1 });
    consumers = [1, 2].map(
      (n) =>
        new RecordingConsumer(
          {
            name: NAMESPACE,
            claimer: new RedisClaimer({ redis, logger: silentLogger }, { prefix }),
            source: new RabbitMqSource({ url: AMQP_URL, queue, delayTiersMs: [100, 500], publishTimeoutMs: 2000, failedPublishRequeueDelayMs: 500, connectionName: `twophase-fuzz-${n}`, logger: process.env.FUZZ_LOG ? { debug: () => undefined, info: () => undefined, warn: (o: object, m?: string) => console.warn(m, o), error: (o: object, m?: string) => console.error(m, o) } : silentLogger }),
            concurrency: 8,
            busyRequeueDelayMs: 100,
            logger: silentLogger,
            observers: [recorder.observer],
          },
          recorder,
        ),
    );
    for (const c of consumers) await c.start();
  });

  afterAll(async () => {
    await Promise.all(consumers.map((c) => c.stop()));
    for (const q of [queue, `${queue}.dlq`, `${queue}.delay.100ms`, `${queue}.delay.500ms`]) await channel.deleteQueue(q).catch(() => undefined);
    await channel.deleteExchange(`${queue}.dlx`).catch(() => undefined);
    await admin.close().catch(() => undefined);
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 500);
      cursor = next;
      if (keys.length > 0) await redis.unlink(...keys);
    } while (cursor !== '0');
    await redis.quit();
  });

  test('keys, headers and bodies: typed dead-letters with the reason, nothing lost, consumers stay up', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.nat().chain(() => {
          const limits: FuzzLimits = { namespace: NAMESPACE, hugeHeaderBytes: 20 * 1024, hugeBodyBytes: 1024 * 1024, structuredHeaders: true, runTag: `${prefix}-r${++run}-` };
          return fc.array(fuzzMessage(limits), { minLength: 1, maxLength: 15 });
        }),
        (messages) => runBatch(messages),
      ),
      { numRuns: 25, endOnFailure: true, ...labelledReport<FuzzMessage[]>() },
    );
  }, 240_000);

  test('headers well under the limit (40 KB in all) on a message that must be dead-lettered, and on a good one', async () => {
    const junk = { 'x-junk': 'J'.repeat(20_000), 'x-junk-2': 'K'.repeat(20_000) };
    await runBatch([
      { label: '40 KB of headers, invalid key', header: 42, extraHeaders: junk, body: Buffer.from('{}') },
      { label: '40 KB of headers, good', header: `${prefix}-40k`, extraHeaders: junk, body: Buffer.from('{}') },
    ]);
  }, 60_000);

  // The adapter keeps republished header tables under amqplib's 64 KiB encode buffer by dropping
  // the largest foreign headers (named in twophase-headers-dropped), so this one is dead-lettered.
  test('headers at the publishable limit (about 65.4 KB in all) on a message that must be dead-lettered', async () => {
    const big: FuzzMessage = { label: 'headers at the limit, invalid key', header: 42, extraHeaders: { 'x-junk': 'J'.repeat(NEAR_LIMIT_HEADER_BYTES) }, body: Buffer.from('{}') };
    await runBatch([big], 3_000);
  }, 60_000);
});
