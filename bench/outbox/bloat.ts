/**
 * The outbox table's size after many messages relayed, with autovacuum as the server runs it
 * (`npm run bench:outbox:bloat`). Not a test: nothing fails on a number.
 *
 * A stager commits `--messages` small messages (`--body` bytes; no ordering key, or `--keys` keys)
 * in transactions of 1,000, never more than `--backlog` ahead of the relay, while one `OutboxRelay` (started as in
 * production, LISTEN/NOTIFY wake-up, batch `--batch`) publishes them to a broker-less publisher
 * that counts (it resolves each publish at once: the broker plays no part in the table's size).
 * Every `--every` messages relayed it prints the table's size (pg_total_relation_size), live and
 * dead tuples and the autovacuum count (pg_stat_user_tables); at the end, the same figures, the
 * largest size seen and the server's autovacuum settings, as JSON (`--out`).
 *
 * Every line also gives the relay's rate since the previous line (msg/s).
 *
 * `--prefill N` stages N messages before the relay starts (a standing backlog from its first
 * claim on). `--schema-version N` migrates the bench's schema only up to migration N (default:
 * every migration), to compare a table of an earlier version. `--rest S` waits S seconds at the
 * end instead of one autovacuum naptime (0: no wait).
 *
 * Run it on a server with autovacuum on (the shared test server has it off): for example a
 * private cluster,
 *   initdb -D /tmp/pg -A trust -U postgres && pg_ctl -D /tmp/pg -o '-p 55437' start
 *   PGPORT=55437 npm run bench:outbox:bloat -- --messages 1000000
 * A deep backlog behind few keys (the claim's cost, migration 6 against 5):
 *   PGPORT=55437 npm run bench:outbox:bloat -- --messages 60000 --keys 50 --backlog 20000 --prefill 20000 --every 10000 --rest 0 [--schema-version 5]
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Pool } from 'pg';
import { OutboxRelay, type OutboxPublisher, silentLogger } from '../../src';
import { migrate, MIGRATIONS, PostgresOutboxNotifier, PostgresOutboxStore, stageOutbox } from '../../adapters/postgres';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}
const MESSAGES = arg('messages', 1_000_000);
const BATCH = arg('batch', 500);
const BODY_BYTES = arg('body', 100);
const BACKLOG = arg('backlog', 5_000);
/** Ordering keys the messages cycle through; 0 = none (each message stands alone). */
const KEYS = arg('keys', 0);
const EVERY = arg('every', 100_000);
const NEWEST = Math.max(...MIGRATIONS.map((m) => m.version));
/** Migrate only up to this version (an earlier table, for comparison). */
const SCHEMA_VERSION = arg('schema-version', NEWEST);
/** Messages staged before the relay starts (a standing backlog from the first claim on). */
const PREFILL = arg('prefill', 0);
/** Seconds to wait at the end for autovacuum; -1 = one naptime and 5 s. */
const REST_S = arg('rest', -1);
const outIndex = process.argv.indexOf('--out');
const OUT = outIndex >= 0 ? process.argv[outIndex + 1]! : join(__dirname, '..', 'results', 'outbox-bloat.json');

const pool = new Pool({ host: process.env.PGHOST ?? '127.0.0.1', port: Number(process.env.PGPORT ?? 5432), user: process.env.PGUSER ?? 'postgres', database: process.env.PGDATABASE ?? 'test', max: 10 });
const schema = `bench_outbox_bloat_${randomBytes(3).toString('hex')}`;
const step = (line: string) => process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);
const mib = (b: number) => `${(b / 1048576).toFixed(1)} MiB`;

/** Resolves every publish at once and counts them: the table, not the broker, is measured. */
class CountingPublisher implements OutboxPublisher {
  readonly system = 'rabbitmq' as const;
  count = 0;
  publish(): Promise<void> {
    this.count++;
    return Promise.resolve();
  }
}

interface Sample {
  readonly relayed: number;
  readonly seconds: number;
  /** Milliseconds since the start, for the rate between two samples. */
  readonly ms: number;
  readonly bytes: number;
  readonly live: number;
  readonly dead: number;
  readonly autovacuumRuns: number;
}

async function sample(relayed: number, started: number): Promise<Sample> {
  const r = (
    await pool.query<{ b: string; live: string | null; dead: string | null; av: string | null }>(
      `SELECT pg_total_relation_size($1::regclass) AS b, s.n_live_tup AS live, s.n_dead_tup AS dead, s.autovacuum_count AS av
         FROM pg_stat_user_tables s WHERE s.schemaname = $2 AND s.relname = 'twophase_outbox'`,
      [`${schema}.twophase_outbox`, schema],
    )
  ).rows[0]!;
  const ms = performance.now() - started;
  return { relayed, seconds: Math.round(ms / 1000), ms: Math.round(ms), bytes: Number(r.b), live: Number(r.live ?? 0), dead: Number(r.dead ?? 0), autovacuumRuns: Number(r.av ?? 0) };
}

/** Applies the migrations up to SCHEMA_VERSION (no tenant inbox) and records them, as `migrate` does. */
async function migrateUpTo(version: number): Promise<void> {
  if (version >= NEWEST) {
    await migrate(pool, { schema });
    return;
  }
  await pool.query(`CREATE SCHEMA ${schema}; CREATE TABLE ${schema}.twophase_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT clock_timestamp())`);
  for (const m of MIGRATIONS.filter((x) => x.version <= version && !x.needsTenants)) {
    await pool.query(m.sql({ schema, schemaName: schema }));
    await pool.query(`INSERT INTO ${schema}.twophase_migrations (version, name) VALUES ($1, $2)`, [m.version, m.name]);
  }
}

async function main(): Promise<void> {
  await migrateUpTo(SCHEMA_VERSION);
  const settings = (await pool.query<{ name: string; setting: string }>("SELECT name, setting FROM pg_settings WHERE name LIKE 'autovacuum%' ORDER BY name")).rows;
  const reloptions = (await pool.query<{ o: string[] | null }>("SELECT reloptions AS o FROM pg_class WHERE oid = $1::regclass", [`${schema}.twophase_outbox`])).rows[0]?.o ?? [];
  const autovacuum = settings.find((s) => s.name === 'autovacuum')?.setting;
  step(`outbox bloat: schema ${schema} (migrations up to ${Math.min(SCHEMA_VERSION, NEWEST)}), ${MESSAGES} messages of ${BODY_BYTES} B, ${KEYS > 0 ? `${KEYS} ordering keys` : 'no ordering key'}, batch ${BATCH}, backlog ≤ ${BACKLOG}; autovacuum ${autovacuum}; table options ${reloptions.join(', ')}; load ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  if (autovacuum !== 'on') step('  warning: autovacuum is off on this server: the table only shrinks back by an explicit VACUUM');
  const publisher = new CountingPublisher();
  const relay = new OutboxRelay(
    { store: new PostgresOutboxStore({ pool }, { schema }), publisher, notifier: new PostgresOutboxNotifier({ pool, logger: silentLogger }, { schema }), logger: silentLogger },
    { name: 'bloat', batchSize: BATCH, statsIntervalMs: 0, pollIntervalMs: 100 },
  );
  const body = randomBytes(BODY_BYTES);
  const client = await pool.connect();
  /** Stages `k` messages from number `from` in one transaction. */
  const stageBatch = async (from: number, k: number): Promise<void> => {
    await client.query('BEGIN');
    await stageOutbox(
      client,
      Array.from({ length: k }, (_, i) => ({ to: { exchange: '', routingKey: 'bloat' }, body, orderingKey: KEYS > 0 ? `k${(from + i) % KEYS}` : null })),
      { schema },
    );
    await client.query('COMMIT');
  };
  // A backlog waiting before the relay starts (--prefill), staged as the loop below stages.
  let staged = 0;
  while (staged < Math.min(PREFILL, MESSAGES)) {
    const k = Math.min(1000, Math.min(PREFILL, MESSAGES) - staged);
    await stageBatch(staged, k);
    staged += k;
  }
  if (PREFILL > 0) step(`  ${staged} messages staged before the relay starts`);
  const started = performance.now();
  const samples: Sample[] = [await sample(0, started)];
  let maxBytes = samples[0]!.bytes;
  await relay.start();
  try {
    let nextSample = EVERY;
    while (publisher.count < MESSAGES) {
      if (staged < MESSAGES && staged - publisher.count < BACKLOG) {
        const k = Math.min(1000, MESSAGES - staged);
        await stageBatch(staged, k);
        staged += k;
      } else await new Promise((resolve) => setTimeout(resolve, 20));
      if (publisher.count >= nextSample) {
        const s = await sample(publisher.count, started);
        samples.push(s);
        maxBytes = Math.max(maxBytes, s.bytes);
        const previous = samples[samples.length - 2]!;
        const rate = Math.round((s.relayed - previous.relayed) / Math.max(0.001, (s.ms - previous.ms) / 1000));
        step(`  ${s.relayed} relayed in ${s.seconds} s (${rate} msg/s since the last line): table ${mib(s.bytes)}, ${s.live} live / ${s.dead} dead tuples, autovacuum ran ${s.autovacuumRuns}×`);
        nextSample += EVERY;
      }
    }
  } finally {
    client.release();
    await relay.stop();
  }
  // Rows are deleted once confirmed: wait for the last DELETE, then sample right away and again
  // after one autovacuum naptime, so the table's resting size is seen too.
  const end = await sample(publisher.count, started);
  const naptime = Number(settings.find((s) => s.name === 'autovacuum_naptime')?.setting ?? 60);
  const rest = REST_S >= 0 ? REST_S : naptime + 5;
  step(`  done: ${end.relayed} relayed in ${end.seconds} s (${Math.round(end.relayed / Math.max(0.001, end.ms / 1000))} msg/s); table ${mib(end.bytes)} (largest seen ${mib(Math.max(maxBytes, end.bytes))}), ${end.live} live / ${end.dead} dead tuples; waiting ${rest} s for autovacuum`);
  await new Promise((resolve) => setTimeout(resolve, rest * 1000));
  const rested = await sample(publisher.count, started);
  const pending = Number((await pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${schema}.twophase_outbox`)).rows[0]!.n);
  step(`  after ${rest} s idle: table ${mib(rested.bytes)}, ${rested.dead} dead tuples, autovacuum ran ${rested.autovacuumRuns}×, ${pending} rows left`);
  const result = { date: new Date().toISOString(), schemaVersion: Math.min(SCHEMA_VERSION, NEWEST), prefill: PREFILL, messages: MESSAGES, bodyBytes: BODY_BYTES, keys: KEYS, batch: BATCH, backlog: BACKLOG, relayed: publisher.count, maxBytes: Math.max(maxBytes, end.bytes), end, rested, rowsLeft: pending, samples, autovacuum: Object.fromEntries(settings.map((s) => [s.name, s.setting])), tableOptions: reloptions, load: loadavg() };
  await pool.query(`DROP SCHEMA ${schema} CASCADE`);
  await pool.end();
  mkdirSync(dirname(OUT), { recursive: true });
  writeFileSync(OUT, `${JSON.stringify(result, null, 2)}\n`);
  step(`written to ${OUT}`);
}

main().catch((error: unknown) => {
  process.stderr.write(`outbox bloat bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
