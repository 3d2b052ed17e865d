/**
 * TTL policy per consumer and per message type (issue #16 part 2), on the in-process broker:
 * the policy's bounds checked at construction with errors naming the declarer, the value and the
 * bound; the policy's defaults; each delivery claimed with its type's TTLs; a type's short lease
 * kept alive at its own pace; describe() and the one start line.
 */
import {
  ack,
  type Claimer,
  type ClaimOptions,
  ConfigurationError,
  ConsumerBase,
  type ConsumerOptions,
  type Disposition,
  InMemoryClaimer,
  type Message,
  TtlPolicy,
  type TypeTtls,
} from '../../src';
import { MemoryBroker, MemorySource } from '../../adapters/memory';
import { ManualSource, recordingDelivery} from './helpers';
import { waitFor } from '../support/wait';

const DAY = 24 * 60 * 60 * 1000;

class TypedConsumer extends ConsumerBase<unknown> {
  handled: string[] = [];
  constructor(
    options: ConsumerOptions,
    private readonly work: (message: Message<unknown>) => Promise<void> = async () => undefined,
  ) {
    super(options);
  }
  async handle(message: Message<unknown>): Promise<Disposition> {
    await this.work(message);
    this.handled.push(message.key);
    return ack();
  }
}

/** Passes claims through and records the options each key was claimed with. */
class RecordingClaimer implements Claimer {
  readonly claims = new Map<string, ClaimOptions>();
  constructor(readonly inner: Claimer = new InMemoryClaimer()) {}
  get kind() {
    return this.inner.kind;
  }
  claim(key: string, options: ClaimOptions) {
    this.claims.set(key, options);
    return this.inner.claim(key, options);
  }
}

const silent = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

/** Keys kept 1 to 365 days, notifications at most 30 days: the issue's example. */
const policy = new TtlPolicy({ minDoneTtlMs: DAY, maxDoneTtlMs: 365 * DAY, defaultDoneTtlMs: 7 * DAY, minLeaseTtlMs: 100 });

const byTypeHeader: TypeTtls['typeOf'] = (d) => (typeof d.headers.type === 'string' ? d.headers.type : undefined);

function options(overrides: Partial<ConsumerOptions> = {}): ConsumerOptions {
  return { name: 'billing', claimer: new InMemoryClaimer(), source: new ManualSource(), logger: silent, ttlPolicy: policy, ...overrides };
}

describe('TtlPolicy', () => {
  test('refuses unknown options, a minimum above its maximum and a default outside the bounds', () => {
    expect(() => new TtlPolicy({ minDoneTtl: 1 } as never)).toThrow(/unknown option "minDoneTtl" \(did you mean "minDoneTtlMs"\?\)/);
    expect(() => new TtlPolicy({ minDoneTtlMs: 10 * DAY, maxDoneTtlMs: DAY })).toThrow(/maxDoneTtlMs/);
    expect(() => new TtlPolicy({ minDoneTtlMs: DAY, defaultDoneTtlMs: 60_000 })).toThrow(/defaultDoneTtlMs/);
    expect(() => new TtlPolicy({ maxLeaseTtlMs: 2 * DAY })).toThrow(ConfigurationError);
  });

  test('a message type below the minimum: ConfigurationError naming the consumer, the type, the value and the bound', () => {
    const create = () => new TypedConsumer(options({ typeTtls: { typeOf: byTypeHeader, types: { payment: { doneTtlMs: 60_000 } } } }));
    expect(create).toThrow(ConfigurationError);
    expect(create).toThrow(`consumer "billing", message type "payment": doneTtlMs 60000 (1 min) is below the TTL policy's minDoneTtlMs 86400000 (1 d)`);
  });

  test('a message type above the maximum names the maximum', () => {
    const notifications = new TtlPolicy({ maxDoneTtlMs: 30 * DAY });
    expect(() => new TypedConsumer(options({ ttlPolicy: notifications, typeTtls: { typeOf: byTypeHeader, types: { email: { doneTtlMs: 365 * DAY } } } }))).toThrow(
      `consumer "billing", message type "email": doneTtlMs 31536000000 (365 d) is above the TTL policy's maxDoneTtlMs 2592000000 (30 d)`,
    );
  });

  test("the consumer's own TTLs are checked too, and a lease outside the lease bounds", () => {
    expect(() => new TypedConsumer(options({ doneTtlMs: 3_600_000 }))).toThrow(`consumer "billing": doneTtlMs 3600000 (1 h) is below the TTL policy's minDoneTtlMs 86400000 (1 d)`);
    const strict = new TtlPolicy({ minLeaseTtlMs: 5000, maxLeaseTtlMs: 60_000 });
    expect(() => new TypedConsumer(options({ ttlPolicy: strict, typeTtls: { typeOf: byTypeHeader, types: { report: { leaseTtlMs: 120_000 } } } }))).toThrow(
      /message type "report": leaseTtlMs 120000 \(2 min\) is above the TTL policy's maxLeaseTtlMs 60000/,
    );
    expect(() => new TypedConsumer(options({ typeTtls: { typeOf: byTypeHeader, types: { x: { leaseTtlMs: 2 * DAY } } } }))).toThrow(/message type "x": leaseTtlMs/);
    expect(() => new TypedConsumer(options({ typeTtls: { typeOf: byTypeHeader, types: { x: { leaseTime: 1 } as never } } }))).toThrow(/unknown option "leaseTime"/);
    expect(() => new TypedConsumer(options({ typeTtls: { types: {} } as never }))).toThrow(/typeOf must be a function/);
    expect(() => new TypedConsumer(options({ ttlPolicy: { minDoneTtlMs: 1 } as never }))).toThrow(/ttlPolicy must be a TtlPolicy/);
  });

  test("the policy's defaults apply to a consumer that sets no TTL; describe() lists every effective TTL", () => {
    const consumer = new TypedConsumer(
      options({
        typeTtls: { typeOf: byTypeHeader, types: { payment: { doneTtlMs: 365 * DAY, leaseTtlMs: 60_000 }, notification: { doneTtlMs: DAY } } },
      }),
    );
    expect(consumer.describe()).toEqual({
      name: 'billing',
      ttls: [
        { type: undefined, leaseTtlMs: 30_000, doneTtlMs: 7 * DAY },
        { type: 'payment', leaseTtlMs: 60_000, doneTtlMs: 365 * DAY },
        { type: 'notification', leaseTtlMs: 30_000, doneTtlMs: DAY },
      ],
    });
    expect(new TypedConsumer({ name: 'plain', claimer: new InMemoryClaimer(), source: new ManualSource(), logger: silent }).describe()).toEqual({
      name: 'plain',
      ttls: [{ type: undefined, leaseTtlMs: 30_000, doneTtlMs: 7 * DAY }],
    });
  });

  test('each delivery is claimed with its type’s TTLs (an unlisted or missing type gets the consumer’s); the TTLs are logged once at start', async () => {
    const broker = new MemoryBroker();
    const claimer = new RecordingClaimer();
    const lines: { obj: object; msg?: string }[] = [];
    const logger = { ...silent, info: (obj: object, msg?: string) => void lines.push({ obj, msg }) };
    const consumer = new TypedConsumer(
      options({
        claimer,
        logger,
        source: new MemorySource({ broker, queue: 'mixed' }),
        doneTtlMs: 2 * DAY,
        typeTtls: { typeOf: byTypeHeader, types: { payment: { doneTtlMs: 365 * DAY }, notification: { doneTtlMs: DAY, leaseTtlMs: 5000 } } },
      }),
    );
    await consumer.start();
    broker.publish('mixed', { body: '{}', headers: { 'idempotency-key': 'p1', type: 'payment' } });
    broker.publish('mixed', { body: '{}', headers: { 'idempotency-key': 'n1', type: 'notification' } });
    broker.publish('mixed', { body: '{}', headers: { 'idempotency-key': 'o1', type: 'invoice' } });
    broker.publish('mixed', { body: '{}', headers: { 'idempotency-key': 'u1' } });
    await waitFor(() => consumer.handled.length === 4);
    await consumer.stop();
    expect(Object.fromEntries(claimer.claims)).toEqual({
      'billing:p1': { leaseTtlMs: 30_000, doneTtlMs: 365 * DAY },
      'billing:n1': { leaseTtlMs: 5000, doneTtlMs: DAY },
      'billing:o1': { leaseTtlMs: 30_000, doneTtlMs: 2 * DAY },
      'billing:u1': { leaseTtlMs: 30_000, doneTtlMs: 2 * DAY },
    });
    const ttlLines = lines.filter((l) => l.msg === 'twophase: consumer started');
    expect(ttlLines).toHaveLength(1);
    expect(ttlLines[0]!.obj).toMatchObject({ consumer: 'billing', ttls: consumer.describe().ttls });
  });

  test('a type with a lease shorter than the consumer’s is kept alive at its own pace while its handler runs', async () => {
    const broker = new MemoryBroker();
    const claimer = new InMemoryClaimer();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const consumer = new TypedConsumer(
      options({
        claimer,
        source: new MemorySource({ broker, queue: 'short' }),
        leaseTtlMs: 30_000,
        typeTtls: { typeOf: byTypeHeader, types: { ping: { leaseTtlMs: 300 } } },
      }),
      () => gate,
    );
    await consumer.start();
    broker.publish('short', { body: '{}', headers: { 'idempotency-key': 'k', type: 'ping' } });
    // Well past three of the type's 300 ms leases, another owner still finds the key held.
    await new Promise((r) => setTimeout(r, 1000));
    const other = await claimer.claim('billing:k', { leaseTtlMs: 300, doneTtlMs: DAY });
    expect(other.state).toBe('busy');
    release();
    await waitFor(() => consumer.handled.length === 1);
    await consumer.stop();
  });

  test('batch claims made ahead of dispatch (the Kafka source) use each delivery’s type TTLs too', async () => {
    const claimer = new RecordingClaimer();
    const consumer = new TypedConsumer(options({ claimer, typeTtls: { typeOf: byTypeHeader, types: { payment: { doneTtlMs: 200 * DAY } } } }));
    const prepared = await consumer.claimBatch([recordingDelivery({ key: 'b1', headers: { type: 'payment' } }), recordingDelivery({ key: 'b2' })]);
    expect(prepared.map((p) => p.kind)).toEqual(['claimed', 'claimed']);
    expect(claimer.claims.get('billing:b1')).toEqual({ leaseTtlMs: 30_000, doneTtlMs: 200 * DAY });
    expect(claimer.claims.get('billing:b2')).toEqual({ leaseTtlMs: 30_000, doneTtlMs: 7 * DAY });
  });
});
