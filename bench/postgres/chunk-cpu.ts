/**
 * Node CPU per key of the PostgreSQL per-chunk transaction alone, with no broker and no consumer
 * pipeline: `claimMany` of `--window` keys (PostgresClaimer transactional, `transactionBatch:
 * 'per-chunk'`), one INSERT per key through its `ctx.transaction` client, each receipt committed.
 * Beside it, `raw`: the same work with no SDK, in the shape of floor-batch.ts (BEGIN, the INSERTs,
 * one multi-row INSERT of the claim rows with COMMIT). `--lanes` windows run at once. With
 * `--baseline DIR` the SDK of another checkout runs too; the variants alternate `--rounds` times
 * and the medians are reported, with the per-round ratio `sdk / baseline`. Not a test.
 *
 *   npx ts-node --transpile-only bench/postgres/chunk-cpu.ts [--windows 600] [--rounds 10]
 *     [--window 6] [--lanes 4] [--baseline /path/to/checkout]
 * PGHOST / PGPORT / PGDATABASE / PGUSER select the server (default 127.0.0.1:5432, postgres).
 */
import { join, resolve as resolvePath } from 'node:path';
import { Pool, type PoolClient } from 'pg';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const WINDOWS = Number(arg('--windows') ?? 600);
const ROUNDS = Number(arg('--rounds') ?? 10);
const WINDOW = Number(arg('--window') ?? 6);
const LANES = Number(arg('--lanes') ?? 4);
const BASELINE = arg('--baseline');

type PostgresAdapter = typeof import('../../adapters/postgres');

interface Acquired {
  readonly ok: true;
  readonly result: { readonly state: string; readonly receipt: { readonly transaction: PoolClient; commit(): Promise<void> } };
}

let seq = 0;

/** Node CPU µs per key of `windows` windows run by LANES lanes. */
async function measure(windows: number, runWindow: (keys: string[]) => Promise<void>): Promise<number> {
  const cpu = process.cpuUsage();
  const lane = async () => {
    for (let w = 0; w < windows / LANES; w++) await runWindow(Array.from({ length: WINDOW }, () => `k-${process.pid}-${seq++}`));
  };
  await Promise.all(Array.from({ length: LANES }, lane));
  const d = process.cpuUsage(cpu);
  return (d.user + d.system) / (windows * WINDOW);
}

async function main(): Promise<void> {
  const pool = new Pool({
    host: process.env.PGHOST ?? '127.0.0.1',
    port: Number(process.env.PGPORT ?? 5432),
    user: process.env.PGUSER ?? 'postgres',
    database: process.env.PGDATABASE ?? 'postgres',
    max: LANES + 2,
    idleTimeoutMillis: 0,
  });
  const prefix = `tp_chunkcpu_${process.pid}`;
  /* eslint-disable @typescript-eslint/no-require-imports */
  const sdks: { name: string; adapter: PostgresAdapter; schema: string }[] = [{ name: 'sdk', adapter: require(join(__dirname, '..', '..', 'adapters', 'postgres')) as PostgresAdapter, schema: `${prefix}_sdk` }];
  if (BASELINE) sdks.push({ name: 'baseline', adapter: require(join(resolvePath(BASELINE), 'adapters', 'postgres')) as PostgresAdapter, schema: `${prefix}_base` });
  /* eslint-enable @typescript-eslint/no-require-imports */
  const raw = `${prefix}_raw`;
  const samples = new Map<string, number[]>();
  const note = (name: string, value: number) => samples.set(name, [...(samples.get(name) ?? []), value]);
  try {
    await pool.query(`CREATE SCHEMA ${raw}; CREATE TABLE ${raw}.ledger (id bigserial PRIMARY KEY, key text NOT NULL); CREATE TABLE ${raw}.claims (key text PRIMARY KEY, status text NOT NULL)`);
    const variants: [string, () => Promise<number>][] = [
      [
        'raw',
        () =>
          measure(WINDOWS, async (keys) => {
            const client = await pool.connect();
            try {
              await client.query('BEGIN');
              for (const key of keys) await client.query(`INSERT INTO ${raw}.ledger (key) VALUES ($1)`, [key]);
              await client.query(`INSERT INTO ${raw}.claims (key, status) SELECT k, 'completed' FROM unnest('{${keys.map((k) => `"${k}"`).join(',')}}'::text[]) AS k; COMMIT`);
            } finally {
              client.release();
            }
          }),
      ],
    ];
    for (const sdk of sdks) {
      await sdk.adapter.migrate(pool, { schema: sdk.schema });
      await pool.query(`CREATE TABLE ${sdk.schema}.ledger (id bigserial PRIMARY KEY, key text NOT NULL)`);
      const claimer = new sdk.adapter.PostgresClaimer({ pool }, { schema: sdk.schema, mode: 'transactional', transactionBatch: 'per-chunk' });
      const text = `INSERT INTO ${sdk.schema}.ledger (key) VALUES ($1)`;
      variants.push([
        sdk.name,
        () =>
          measure(WINDOWS, async (keys) => {
            const entries = await claimer.claimMany!(keys.map((key) => ({ key, options: { leaseTtlMs: 30_000, doneTtlMs: 600_000 } })));
            await Promise.all(
              entries.map(async (entry, i) => {
                const acquired = entry as unknown as Acquired;
                if (!entry.ok || acquired.result.state !== 'acquired') throw new Error(`key ${keys[i]} not acquired`);
                await acquired.result.receipt.transaction.query(text, [keys[i]]);
                await acquired.result.receipt.commit();
              }),
            );
          }),
      ]);
    }
    for (let round = 0; round < ROUNDS; round++) {
      // The order rotates by one each round.
      for (let i = 0; i < variants.length; i++) {
        const [name, run] = variants[(i + round) % variants.length]!;
        note(name, await run());
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    for (const [name, xs] of samples) console.log(`${name.padEnd(8)} Node CPU µs/key: median ${median(xs).toFixed(1)}  (${xs.map((x) => x.toFixed(0)).join(' ')})`);
    const base = samples.get('baseline');
    if (base) {
      const ratios = samples.get('sdk')!.map((x, i) => x / base[i]!);
      console.log(`sdk / baseline per round: ${ratios.map((r) => r.toFixed(2)).join(' ')}; median ${median(ratios).toFixed(2)}`);
    }
  } finally {
    await pool.query(`DROP SCHEMA IF EXISTS ${raw} CASCADE`).catch(() => undefined);
    for (const sdk of sdks) await pool.query(`DROP SCHEMA IF EXISTS ${sdk.schema} CASCADE`).catch(() => undefined);
    await pool.end();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
