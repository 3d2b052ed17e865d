/**
 * The claim store of a broker stack, started per run:
 * - `redis`: a private redis-server on a free port, AOF with fsync always (a restart keeps every
 *   claim: the guarantee assumes a store that keeps its data); its faults stop and pause it;
 * - `postgres`: the inbox tables migrated into a schema of their own (`chaos_<run>`) in the
 *   ledger's database on the shared PostgreSQL, so the effect INSERT into `chaos_effects` and the
 *   claim share one transaction. Its fault ends a worker's session mid-transaction
 *   (`pg_terminate_backend`); the server itself is never stopped. The schema is dropped at the end
 *   (the effect rows stay in the ledger);
 * - `gated`: both: the inbox schema as for `postgres`, and a private redis-server for the gate,
 *   WITHOUT persistence (a kill or FLUSHALL loses every gate entry; PostgreSQL stays the truth).
 *   Its faults are those of both stores, plus FLUSHALL of the private server.
 */
import type { Pool } from 'pg';
import { migrate } from '../../../adapters/postgres';
import { RedisServerProcess } from '../../integration/redis/support/redis-process';
import type { StoreConfig } from '../protocol';
import type { StoreKind } from './registry';

export interface ClaimStore {
  /** What the workers are told. */
  readonly config: StoreConfig;
  /** The private redis-server (redis and gated stores). */
  readonly redis?: RedisServerProcess;
  /**
   * Terminates one session of `workerId` that is inside a transaction (postgres stores only),
   * trying for up to a second; answers whether it ended one, and which.
   */
  terminateSession?(workerId: string): Promise<{ readonly ended: boolean; readonly detail: string }>;
  destroy(): Promise<void>;
}

/** Session name prefix of a run's workers (application_name is at most 63 bytes). */
const sessionPrefix = (runId: string) => `chaos-${runId}`.slice(0, 56);

export async function startClaimStore(kind: Exclude<StoreKind, 'memory'>, runId: string, ledger: Pool): Promise<ClaimStore> {
  if (kind === 'redis') {
    const redis = await RedisServerProcess.start(['--appendonly', 'yes', '--appendfsync', 'always']);
    return { config: { kind, port: redis.port, prefix: `chaos:${runId}` }, redis, destroy: () => redis.destroy() };
  }
  const inbox = await startInbox(runId, ledger);
  if (kind === 'postgres') return { config: { kind, schema: inbox.schema, sessionPrefix: inbox.sessionPrefix }, ...inbox.operations };
  // The gate forgets on purpose: no AOF, no RDB; a restart comes back empty.
  const redis = await RedisServerProcess.start(['--appendonly', 'no']);
  return {
    config: { kind, schema: inbox.schema, sessionPrefix: inbox.sessionPrefix, redisPort: redis.port, redisPrefix: `chaos:${runId}` },
    redis,
    terminateSession: inbox.operations.terminateSession,
    destroy: async () => {
      await redis.destroy();
      await inbox.operations.destroy();
    },
  };
}

/** The inbox tables in a schema of the run, and the operations on them. */
async function startInbox(
  runId: string,
  ledger: Pool,
): Promise<{ schema: string; sessionPrefix: string; operations: Required<Pick<ClaimStore, 'terminateSession' | 'destroy'>> }> {
  const schema = `chaos_${runId.replace(/[^a-z0-9]/gi, '_').toLowerCase()}`;
  await migrate(ledger, { schema });
  const prefix = sessionPrefix(runId);
  return {
    schema,
    sessionPrefix: prefix,
    operations: {
      terminateSession: async (workerId) => {
        for (let tries = 0; tries < 10; tries++) {
          const r = await ledger.query<{ pid: number; state: string; terminated: boolean }>(
            `SELECT pid, state, pg_terminate_backend(pid) AS terminated FROM pg_stat_activity
              WHERE application_name = $1 AND xact_start IS NOT NULL AND pid <> pg_backend_pid()
              ORDER BY random() LIMIT 1`,
            [`${prefix}-${workerId}`],
          );
          const row = r.rows[0];
          if (row?.terminated) return { ended: true, detail: `backend ${row.pid} (${row.state}) ended mid-transaction` };
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        return { ended: false, detail: 'no session of the worker was inside a transaction for 1 s' };
      },
      destroy: async () => {
        await ledger.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
      },
    },
  };
}
