/**
 * The transactional policy (issue #13 §5), run against the real PostgresClaimer in transactional
 * mode on the shared PostgreSQL (a fresh schema per suite, keys unique per run).
 *
 * fast-check generates a history of a broker and its consumers over a few keys: publications
 * (duplicates included), deliveries (claims, so redeliveries of copies left pending), and, for
 * any delivery in flight, the handler's effect written through `ctx.transaction`, a commit, a
 * commit whose broker ack is lost, a release (a retryable failure: ROLLBACK), a crash of its
 * worker (the session ends: `pg_terminate_backend`, the receipt is never touched again), and a
 * stall past the lease (the transaction idles longer than `leaseTtlMs`: PostgreSQL's
 * `idle_in_transaction_session_timeout` ends it; the stalled owner later tries to go on).
 *
 * The property: **no effect written through the transaction repeats**, and the effect and the
 * claim commit together or not at all. Checked after every step, against the database:
 * - every key has at most one effect row (the table has no unique constraint: a repeat shows);
 * - a key has an effect row exactly when its inbox row is `completed`, and that row's fencing
 *   token is the effect's;
 * - a commit that succeeded left its own effect; a commit that failed left none of it;
 * - a key with a committed effect is never acquired again (its claims answer `done`);
 * - fencing tokens strictly increase per key.
 * After the history, every copy still pending is delivered by a healthy consumer: every published
 * key ends with exactly one effect (none lost).
 *
 * Time is real (the server ends idle transactions), so a slow machine can end a transaction the
 * history thought alive; the checks above hold whatever the timing, and the model never predicts
 * an outcome that depends on it.
 */
import fc from 'fast-check';
import type { Pool, PoolClient } from 'pg';
import { type ClaimOptions, silentLogger } from '../../src';
import { PostgresClaimer, type TransactionPort, type TransactionReceipt } from '../../adapters/postgres';
import { type PortName, portUnderTest } from '../integration/postgres/support/ports';
import { type OrmName, ormUnderTest } from '../integration/postgres/support/orm-libraries';
import { createEffectTable } from '../integration/postgres/support/port-contract';
import { freshSchema, type SchemaFixture } from '../integration/postgres/support/pg-helpers';
import { describeWithServices } from '../support/services';

const KEYS = ['a', 'b', 'c'] as const;
/** The lease: PostgreSQL ends a transaction idle for this long. */
const LEASE_TTL_MS = 400;
/** A stalled owner waits this long (past the lease) before going on. */
const STALL_MS = 700;
/** Deliveries in flight at most (each holds a pool client and its transaction). */
const MAX_IN_FLIGHT = 4;

type Step =
  | { readonly op: 'publish'; readonly key: number }
  | { readonly op: 'deliver'; readonly key: number }
  | { readonly op: 'effect' | 'commit' | 'commit_lost_ack' | 'release' | 'crash'; readonly slot: number }
  | { readonly op: 'stall' };

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ op: fc.constant('publish' as const), key: fc.nat({ max: KEYS.length - 1 }) }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('deliver' as const), key: fc.nat({ max: KEYS.length - 1 }) }) },
  {
    weight: 6,
    arbitrary: fc.record({ op: fc.constantFrom('effect' as const, 'commit' as const, 'commit_lost_ack' as const, 'release' as const, 'crash' as const), slot: fc.nat({ max: MAX_IN_FLIGHT - 1 }) }),
  },
  { weight: 1, arbitrary: fc.constant({ op: 'stall' as const }) },
);

/** One delivery whose claim was acquired: its transaction is open (as far as the history knows). */
interface InFlight {
  readonly key: string;
  readonly fence: number;
  readonly receipt: TransactionReceipt<unknown>;
  effectWritten: boolean;
  /** The backend pid of its transaction's session (undefined once gone). */
  readonly pid: number | undefined;
}

/** A consumer's view of the broker and the deliveries, over one run's keys. */
class History {
  /** Copies of each key not yet acked (published, or back after a lost ack, crash or release). */
  readonly pending = new Map<string, number>();
  readonly inFlight: InFlight[] = [];
  /** Receipts of crashed workers: never used again in the history; their clients are returned at the end. */
  readonly abandoned: TransactionReceipt<unknown>[] = [];
  readonly published = new Set<string>();
  /** Fence of each key's successful commit. */
  readonly committed = new Map<string, number>();
  /** Fences whose commit failed (their effect must not exist). */
  readonly failedCommits = new Set<string>();
  readonly highestFence = new Map<string, number>();
  readonly log: string[] = [];

  constructor(
    readonly f: SchemaFixture,
    readonly claimer: PostgresClaimer<unknown>,
    readonly flavor: FlavorRun,
    readonly effects: string,
    readonly run: string,
    /** Write the effect on the pool instead of ctx.transaction (a broken handler: the checks must catch it). */
    readonly bypassTransaction = false,
  ) {}

  key(i: number): string {
    return `${this.run}-${KEYS[i]}`;
  }

  requeue(key: string): void {
    this.pending.set(key, (this.pending.get(key) ?? 0) + 1);
  }

  ack(key: string): void {
    this.pending.set(key, (this.pending.get(key) ?? 1) - 1);
  }

  /** A delivery of `key` claims it; a copy must be pending. */
  async deliver(key: string): Promise<void> {
    if ((this.pending.get(key) ?? 0) === 0 || this.inFlight.length >= MAX_IN_FLIGHT) return;
    this.ack(key); // the copy is with this consumer now
    const options: ClaimOptions = { leaseTtlMs: LEASE_TTL_MS, doneTtlMs: 600_000 };
    let result;
    try {
      result = await this.claimer.claim(key, options);
    } catch (error) {
      this.log.push(`deliver ${key}: ${(error as Error).name}`);
      this.requeue(key);
      return;
    }
    this.log.push(`deliver ${key}: ${result.state}${result.state === 'acquired' ? ` fence ${result.receipt.fencingToken}` : ''}`);
    if (result.state === 'done') return; // acked as a duplicate
    if (result.state === 'busy') {
      this.requeue(key);
      return;
    }
    const fence = result.receipt.fencingToken;
    const committedFence = this.committed.get(key);
    if (committedFence !== undefined) throw new Error(`${key} acquired again (fence ${fence}) after its commit (fence ${committedFence})`);
    if (!(fence > (this.highestFence.get(key) ?? 0))) throw new Error(`fencing token of ${key} did not increase: ${this.highestFence.get(key)} then ${fence}`);
    this.highestFence.set(key, fence);
    const pid = await this.flavor.pid(result.receipt.transaction);
    this.inFlight.push({ key, fence, receipt: result.receipt as TransactionReceipt<unknown>, effectWritten: false, pid });
  }

  /** The handler's effect, through ctx.transaction. False when the transaction is gone. */
  async effect(d: InFlight): Promise<boolean> {
    if (d.effectWritten) return true;
    try {
      if (this.bypassTransaction) await this.f.pool.query(`INSERT INTO ${this.effects} (key, amount) VALUES ($1, $2)`, [d.key, d.fence]);
      else await this.flavor.write(d.receipt.transaction, d.key, d.fence);
      d.effectWritten = true;
      return true;
    } catch (error) {
      this.log.push(`effect ${d.key}/${d.fence} failed: ${(error as Error).message}`);
      return false;
    }
  }

  /** The handler failed (or its effect did): ROLLBACK, the copy goes back to the broker. */
  async release(d: InFlight): Promise<void> {
    this.remove(d);
    await d.receipt.release().catch(() => undefined);
    this.requeue(d.key);
  }

  async commit(d: InFlight, ackLost: boolean): Promise<void> {
    if (!(await this.effect(d))) return this.release(d);
    this.remove(d);
    try {
      await d.receipt.commit({ fence: d.fence });
    } catch (error) {
      this.log.push(`commit ${d.key}/${d.fence} failed: ${(error as Error).name}`);
      this.failedCommits.add(`${d.key} ${d.fence}`);
      this.requeue(d.key); // the consumer requeues after a failed COMMIT
      return;
    }
    this.log.push(`commit ${d.key}/${d.fence} ok${ackLost ? ', ack lost' : ''}`);
    const before = this.committed.get(d.key);
    if (before !== undefined) throw new Error(`${d.key} committed twice: fences ${before} and ${d.fence}`);
    this.committed.set(d.key, d.fence);
    if (ackLost) this.requeue(d.key); // the broker redelivers the copy
  }

  /** The worker dies: its session ends (PostgreSQL rolls back); the broker redelivers the copy. */
  async crash(d: InFlight): Promise<void> {
    this.remove(d);
    this.abandoned.push(d.receipt);
    const pid = await this.backendPid(d);
    if (pid !== undefined) await this.f.pool.query('SELECT pg_terminate_backend($1)', [pid]);
    this.log.push(`crash ${d.key}/${d.fence}${pid === undefined ? ' (session already gone)' : ''}`);
    this.requeue(d.key);
  }

  /**
   * Every owner stalls past the lease: their transactions idle for STALL_MS, and PostgreSQL ends
   * them (`idle_in_transaction_session_timeout`). Waits until the server has ended those sessions,
   * so a slow machine cannot turn the stall into a shorter one.
   */
  async stall(): Promise<void> {
    const pids = (await Promise.all(this.inFlight.map((d) => this.backendPid(d)))).filter((p): p is number => p !== undefined);
    await new Promise((resolve) => setTimeout(resolve, STALL_MS));
    const deadline = Date.now() + 10_000;
    for (;;) {
      const live = await this.f.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = ANY($1::int[])', [pids]);
      if (live.rows[0]!.n === 0) break;
      if (Date.now() > deadline) throw new Error(`sessions ${pids.join(', ')} still alive 10 s after idling past the ${LEASE_TTL_MS} ms lease`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    this.log.push(`stall ${STALL_MS} ms: ${pids.length} session(s) ended by the server`);
  }

  private async backendPid(d: InFlight): Promise<number | undefined> {
    return d.pid;
  }

  private remove(d: InFlight): void {
    this.inFlight.splice(this.inFlight.indexOf(d), 1);
  }

  /** The invariants, read from the database. */
  async check(): Promise<void> {
    const effects = await this.f.pool.query<{ key: string; fence: string }>(`SELECT key, amount AS fence FROM ${this.effects} WHERE key LIKE $1`, [`${this.run}-%`]);
    const inbox = await this.f.pool.query<{ key_text: string; status: string; fencing_token: string }>(
      `SELECT key_text, status, fencing_token FROM ${this.f.schema}.twophase_inbox WHERE key_text LIKE $1`,
      [`${this.run}-%`],
    );
    const byKey = new Map<string, number[]>();
    for (const e of effects.rows) byKey.set(e.key, [...(byKey.get(e.key) ?? []), Number(e.fence)]);
    const completed = new Map(inbox.rows.filter((r) => r.status === 'completed').map((r) => [r.key_text, Number(r.fencing_token)]));
    const fail = (what: string) => {
      throw new Error(`${what}\neffects: ${JSON.stringify([...byKey])}\ncompleted: ${JSON.stringify([...completed])}\nhistory:\n  ${this.log.join('\n  ')}`);
    };
    for (const [key, fences] of byKey) {
      if (fences.length > 1) fail(`the effect of ${key} repeated: fences ${fences.join(', ')}`);
      if (completed.get(key) !== fences[0]) fail(`${key} has an effect (fence ${fences[0]}) but its inbox row is not completed by that fence (${completed.get(key)})`);
      if (this.failedCommits.has(`${key} ${fences[0]}`)) fail(`${key}: the effect of fence ${fences[0]} exists although its commit failed`);
    }
    for (const [key, fence] of completed) if (!byKey.has(key)) fail(`${key} is completed (fence ${fence}) without its effect`);
    for (const [key, fence] of this.committed) if (byKey.get(key)?.[0] !== fence) fail(`${key}: the commit of fence ${fence} succeeded but its effect is not there`);
  }

  /** Ends the history: live deliveries roll back, then a healthy consumer delivers every pending copy. */
  async drain(): Promise<void> {
    for (const d of [...this.inFlight]) await this.release(d);
    for (const r of this.abandoned) await r.release().catch(() => undefined); // returns the dead clients
    for (let round = 0; round < 50 && [...this.pending.values()].some((n) => n > 0); round++) {
      for (const [key, n] of this.pending) {
        if (n === 0) continue;
        await this.deliver(key);
        const d = this.inFlight.find((x) => x.key === key);
        if (d) await this.commit(d, false);
      }
      if ([...this.pending.values()].some((n) => n > 0)) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await this.check();
    for (const key of this.published) {
      if (!this.committed.has(key)) throw new Error(`${key} was published but never committed (lost)\nhistory:\n  ${this.log.join('\n  ')}`);
    }
  }
}

async function runHistory(f: SchemaFixture, claimer: PostgresClaimer<unknown>, flavor: FlavorRun, effects: string, run: string, steps: readonly Step[], bypassTransaction = false): Promise<History> {
  const h = new History(f, claimer, flavor, effects, run, bypassTransaction);
  try {
    for (const s of steps) {
      switch (s.op) {
        case 'publish':
          h.published.add(h.key(s.key));
          h.requeue(h.key(s.key));
          break;
        case 'deliver':
          await h.deliver(h.key(s.key));
          break;
        case 'stall':
          await h.stall();
          break;
        default: {
          const d = h.inFlight[s.slot % Math.max(1, h.inFlight.length)];
          if (!d) break;
          if (s.op === 'effect' && !(await h.effect(d))) await h.release(d);
          if (s.op === 'commit' || s.op === 'commit_lost_ack') await h.commit(d, s.op === 'commit_lost_ack');
          if (s.op === 'release') await h.release(d);
          if (s.op === 'crash') await h.crash(d);
        }
      }
      await h.check();
    }
    await h.drain();
    return h;
  } finally {
    for (const d of [...h.inFlight]) await d.receipt.release().catch(() => undefined);
  }
}

/** The owner stalls past the lease; a redelivery takes the key over; the stalled owner's commit must fail. */
const STALLED_OWNER: Step[] = [
  { op: 'publish', key: 0 },
  { op: 'publish', key: 0 },
  { op: 'deliver', key: 0 },
  { op: 'effect', slot: 0 },
  { op: 'stall' },
  { op: 'deliver', key: 0 },
  { op: 'commit', slot: 1 },
  { op: 'commit', slot: 0 },
];
/** A crash between the effect and the COMMIT; a commit whose ack is lost; redeliveries. */
const CRASH_AND_LOST_ACK: Step[] = [
  { op: 'publish', key: 1 },
  { op: 'deliver', key: 1 },
  { op: 'effect', slot: 0 },
  { op: 'crash', slot: 0 },
  { op: 'deliver', key: 1 },
  { op: 'commit_lost_ack', slot: 0 },
  { op: 'deliver', key: 1 },
];

/**
 * How the claim's transaction is opened, one way per flavor: by the claimer on a pool client
 * (`native`), or by a database library through its transaction port (`transactions` in the
 * claimer's dependencies):
 * - `pg`, `drizzle`: over the claimer's own pool, so the claim runs as without a port
 *   (`overPoolClient`); `drizzle-callback`: Drizzle's port without it, inside `db.transaction`;
 * - `prisma`, `kysely`, `typeorm`: the library's own object on its own pool (`$transaction`,
 *   `db.transaction().execute`, `dataSource.transaction`); the port is handed in without
 *   `overPoolClient`, so every claim runs inside the library's transaction, and the effect is
 *   written with the library's own API (Prisma's model, Kysely's query builder, TypeORM's
 *   repository) on `ctx.transaction`.
 * - `typeorm-pool`: TypeORM with the claimer on the DataSource's own pool (`typeormPool`): the
 *   claim runs as without a port, and the effect is written with a repository of the
 *   `EntityManager` the port built over the claim's client; `prisma-pool`: Prisma on
 *   `inboxAdapter(new PrismaPg(pool))` with the claimer on that pool: the claim runs as without a
 *   port, and the effect is written with Prisma's model on the interactive transaction entered
 *   over the claim's client.
 * The history is the same; only the effect's statement and the way to find the transaction's
 * session differ.
 */
type FlavorName = 'native' | PortName | OrmName;

/** One flavor set up on one schema. */
interface FlavorRun {
  readonly claimer: PostgresClaimer<unknown>;
  /** Inserts the effect row (key, amount = the fence) through `tx`. */
  write(tx: unknown, key: string, fence: number): Promise<void>;
  /** The backend pid of the transaction's session (undefined when it is gone). */
  pid(tx: unknown): Promise<number | undefined>;
  close(): Promise<void>;
}

const CLAIMER_OPTIONS = { mode: 'transactional', keepKeyText: true, operationTimeoutMs: 2000 } as const;
/** The ORM flavors' pools: as large as the claimer's (the deliveries in flight and the crashed ones). */
const ORM_POOL_SIZE = 16;
const ORM_NAMES: readonly string[] = ['prisma', 'kysely', 'typeorm'];

async function setUpFlavor(name: FlavorName, f: SchemaFixture, effects: string): Promise<FlavorRun> {
  const pool = f.pool as Pool;
  const withPort = (port: TransactionPort<unknown>) => new PostgresClaimer({ pool, logger: silentLogger, transactions: port }, { schema: f.schema, ...CLAIMER_OPTIONS });
  const pidThrough = (port: TransactionPort<unknown>) => async (tx: unknown) => {
    const rows = await port.query(tx, 'SELECT pg_backend_pid()::text AS pid', []).catch(() => []);
    return rows[0] === undefined ? undefined : Number(rows[0].pid);
  };
  const insert = `INSERT INTO ${effects} (key, amount) VALUES ($1, $2)`;
  if (name === 'native') {
    return {
      claimer: new PostgresClaimer({ pool, logger: silentLogger }, { schema: f.schema, ...CLAIMER_OPTIONS }) as PostgresClaimer<unknown>,
      write: async (tx, key, fence) => void (await (tx as PoolClient).query(insert, [key, fence])),
      pid: async (tx) => (tx as PoolClient & { processID?: number }).processID,
      close: async () => undefined,
    };
  }
  if (name === 'typeorm-pool' || name === 'prisma-pool') {
    // The claimer on the library's own pool, the port whole: every claim takes overPoolClient.
    const lib = await ormUnderTest(name, f.schema, ORM_POOL_SIZE);
    const claimer = new PostgresClaimer({ pool: lib.claimerPool!, logger: silentLogger, transactions: lib.port }, { schema: f.schema, ...CLAIMER_OPTIONS });
    const write = async (tx: unknown, key: string, fence: number) => {
      lib.checkClaimTransaction?.(tx);
      await lib.writeEffect(tx, key, fence);
    };
    return { claimer, write, pid: pidThrough(lib.port), close: () => lib.close() };
  }
  if (ORM_NAMES.includes(name)) {
    const lib = await ormUnderTest(name as OrmName, f.schema, ORM_POOL_SIZE);
    const full = lib.port;
    // Without overPoolClient (Kysely offers it; its pool is not the claimer's anyway): one path.
    const port: TransactionPort<unknown> = { name: full.name, transaction: full.transaction.bind(full), query: full.query.bind(full) };
    return { claimer: withPort(port), write: (tx, key, fence) => lib.writeEffect(tx, key, fence), pid: pidThrough(port), close: () => lib.close() };
  }
  const { port } = portUnderTest(name as PortName, pool);
  return { claimer: withPort(port), write: async (tx, key, fence) => void (await port.query(tx, insert, [key, fence])), pid: pidThrough(port), close: async () => undefined };
}

const ALL_FLAVORS: readonly FlavorName[] = ['native', 'pg', 'drizzle', 'drizzle-callback', 'prisma', 'prisma-pool', 'kysely', 'typeorm', 'typeorm-pool'];
/** The flavors this run checks: every one by default; TWOPHASE_MODEL_FLAVORS=native,prisma to choose. */
const FLAVORS = (process.env.TWOPHASE_MODEL_FLAVORS?.split(',') ?? ALL_FLAVORS) as FlavorName[];
for (const name of FLAVORS) if (!ALL_FLAVORS.includes(name)) throw new Error(`TWOPHASE_MODEL_FLAVORS: unknown flavor "${name}" (known: ${ALL_FLAVORS.join(', ')})`);

describeWithServices(['postgres'], 'model: the transactional inbox policy on the real PostgresClaimer (127.0.0.1:5432)', () => {
  describe.each(FLAVORS)('transactions: %s', (flavorName) => {
    let fl: FlavorRun;
    let f: SchemaFixture;
    let effects: string;
    let claimer: PostgresClaimer<unknown>;
    beforeAll(async () => {
      f = await freshSchema('txmodel', { pool: { max: 16 } });
      effects = `${f.schema}.effect`;
      // No unique constraint on key: a repeated effect is a second row (the fence goes in `amount`).
      await createEffectTable(f.pool, f.schema);
      fl = await setUpFlavor(flavorName, f, effects);
      claimer = fl.claimer;
      await claimer.ready();
    });
    afterAll(async () => {
      await fl?.close();
      await f?.cleanup();
    });

    test('no effect written through the transaction repeats, under crashes, lost acks, lease expiry and redelivery', async () => {
      let run = 0;
      await fc.assert(
        fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 30 }), async (steps) => {
          await runHistory(f, claimer, fl, effects, `r${++run}`, steps);
        }),
        { numRuns: 40, examples: [[STALLED_OWNER], [CRASH_AND_LOST_ACK]] },
      );
    }, 600_000);

    test('lease expiry: the stalled owner\'s late COMMIT fails and applies nothing; the redelivery\'s commit is the one effect', async () => {
      const h = await runHistory(f, claimer, fl, effects, 'stalled', STALLED_OWNER);
      const key = h.key(0);
      expect(h.failedCommits.size).toBe(1); // the stalled owner (the first fence)
      const [failed] = [...h.failedCommits];
      expect(Number(failed!.split(' ')[1])).toBeLessThan(h.committed.get(key)!);
    });

    test('the checks have teeth: an effect written beside the transaction (on the pool) is caught repeating after a crash', async () => {
      await expect(runHistory(f, claimer, fl, effects, 'bypass', CRASH_AND_LOST_ACK, true)).rejects.toThrow(/the effect of bypass-b repeated|not completed by that fence/);
    });
  });
});
