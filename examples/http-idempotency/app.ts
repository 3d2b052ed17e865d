/**
 * An Express route honouring the `Idempotency-Key` header with `runOnce`:
 *
 * - the first request with a key creates the payment and answers 201; a repeat (same key, same
 *   body) gets the first status code and body again, with `Idempotent-Replayed: true`;
 * - a repeat while the first is still running answers 409 with `Retry-After`;
 * - the same key with another body answers 422;
 * - no key, or a bad body, answers 400 before anything is claimed.
 *
 * The status codes follow the IETF draft "The Idempotency-Key HTTP Header Field"
 * (draft-ietf-httpapi-idempotency-key-header, section 2.7: 400, 409, 422).
 *
 * With the PostgreSQL claimer in transactional mode, the payment row is written through the
 * claim's transaction (`context.transaction`): the row and the key commit together or not at
 * all. With another claimer (Redis) the row is written through the pool, beside the claim.
 */
import { createHash, randomUUID } from 'node:crypto';
import express, { type Express, type Request, type Response } from 'express';
import type { Pool, PoolClient } from 'pg';
import {
  type Claimer,
  ClaimerUnavailableError,
  type FailurePolicy,
  InProgressError,
  InvalidKeyError,
  KeyConflictError,
  PreviousAttemptFailedError,
  runOnce,
} from '../../src';

/** The payment provider call. Throw {@link ProviderRefusedError} when it certainly charged nothing. */
export type Charge = (payment: { readonly id: string; readonly account: string; readonly amount: number }) => Promise<void>;

/** The provider refused the call before charging (connection refused, 503 with no charge): safe to retry with the same key. */
export class ProviderRefusedError extends Error {
  override readonly name = 'ProviderRefusedError';
}

export interface PaymentsAppOptions {
  /** The claim store: `PostgresClaimer` (standalone or transactional) or `RedisClaimer`. */
  readonly claimer: Claimer;
  /** Where payments are written when the claimer hands out no transaction. */
  readonly pool: Pool;
  /** The payments table, schema-qualified (created by {@link createPaymentsTable}). */
  readonly table: string;
  /** The provider call. Default: charges nothing and succeeds. */
  readonly charge?: Charge;
  /** How long a repeat waits for a running first request before answering 409, ms. Default 0. */
  readonly waitMs?: number;
  /** Lease of a running request, ms. Default 10 000. */
  readonly leaseTtlMs?: number;
  /** How long a key replays its response, ms. Default 24 h. */
  readonly doneTtlMs?: number;
}

/** What is stored with the key and replayed: the first response. */
type StoredResponse = {
  readonly status: number;
  readonly body: { readonly [key: string]: string | number };
};

/** Creates the payments table. No unique constraint on the key: a duplicate payment would show as a second row. */
export async function createPaymentsTable(pool: Pool, table: string): Promise<void> {
  await pool.query(`CREATE TABLE IF NOT EXISTS ${table} (id uuid PRIMARY KEY, account text NOT NULL, amount integer NOT NULL, idempotency_key text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`);
}

/**
 * A failure the provider certainly did not act on frees the key (the client may retry with the
 * same key); any other failure may have charged, so the key stays blocked until someone checks.
 */
const failurePolicy = (error: unknown): FailurePolicy => (error instanceof ProviderRefusedError ? 'release' : 'record');

export function createPaymentsApp(options: PaymentsAppOptions): Express {
  const { claimer, pool, table } = options;
  const charge: Charge = options.charge ?? (async () => undefined);
  const app = express();
  app.use(express.json());

  app.post('/payments', async (req: Request, res: Response) => {
    const key = req.get('Idempotency-Key');
    if (!key) return void res.status(400).json({ error: 'missing_idempotency_key' });
    // In a real service the actor comes from authentication; two clients may pick the same key.
    const account = req.get('X-Account') ?? 'anonymous';
    const amount: unknown = (req.body as { amount?: unknown } | undefined)?.amount;
    if (typeof amount !== 'number' || !Number.isInteger(amount) || amount <= 0) return void res.status(400).json({ error: 'amount must be a positive integer' });
    try {
      const outcome = await runOnce<StoredResponse, PoolClient | undefined>(
        {
          claimer,
          scope: { operation: 'POST /payments', actor: account },
          key,
          fingerprint: createHash('sha256').update(JSON.stringify(req.body)).digest('hex'),
          leaseTtlMs: options.leaseTtlMs ?? 10_000,
          doneTtlMs: options.doneTtlMs ?? 24 * 60 * 60 * 1000,
          waitMs: options.waitMs ?? 0,
          onFailure: failurePolicy,
        },
        async ({ transaction }) => {
          const id = randomUUID();
          // The provider first: a refused charge then leaves nothing behind, whatever the claimer.
          await charge({ id, account, amount });
          await (transaction ?? pool).query(`INSERT INTO ${table} (id, account, amount, idempotency_key) VALUES ($1, $2, $3, $4)`, [id, account, amount, key]);
          return { status: 201, body: { id, account, amount } };
        },
      );
      res.set('Idempotent-Replayed', outcome.status === 'replayed' ? 'true' : 'false');
      res.status(outcome.result.status).json(outcome.result.body);
    } catch (error) {
      answerError(res, error);
    }
  });
  return app;
}

function answerError(res: Response, error: unknown): void {
  if (error instanceof InProgressError) return void res.status(409).set('Retry-After', '1').json({ error: 'request_in_progress' });
  if (error instanceof KeyConflictError) return void res.status(422).json({ error: 'idempotency_key_reused_with_another_body' });
  if (error instanceof PreviousAttemptFailedError) return void res.status(409).json({ error: 'previous_attempt_failed', detail: 'an earlier request with this key failed and may have charged; it needs checking before a retry' });
  if (error instanceof InvalidKeyError) return void res.status(400).json({ error: 'invalid_idempotency_key', detail: error.message });
  if (error instanceof ClaimerUnavailableError || error instanceof ProviderRefusedError) return void res.status(503).set('Retry-After', '1').json({ error: 'unavailable' });
  res.status(500).json({ error: 'internal_error' });
}
