/**
 * Lost replies at the PostgreSQL client boundary for the claimer conformance suite: a view of a
 * `pg` Pool whose clients run the commit and release statements (recognised by their
 * `/* twophase:<operation> *\/` comment; in transactional mode, the text that ends in COMMIT and
 * the unlock, and ROLLBACK) on the server as usual, then reject as pg does when the
 * connection ends with a reply outstanding, when a drop is armed.
 */
import type { Pool, PoolClient } from 'pg';
import { type ReplyFaults, type ReplyOperation } from '../../../conformance/reply-faults';

function operationOf(query: unknown): ReplyOperation | undefined {
  const text = typeof query === 'string' ? query : (query as { text?: unknown } | null)?.text;
  if (typeof text !== 'string') return undefined;
  if (text.startsWith('/* twophase:commit */')) return 'commit';
  if (text.startsWith('/* twophase:release */')) return 'release';
  // Transactional mode: the completion, COMMIT and unlock in one text; a release is ROLLBACK.
  if (/; COMMIT; SELECT pg_advisory_unlock\(/.test(text)) return 'commit';
  if (text === 'ROLLBACK') return 'release';
  return undefined;
}

function droppingClient(client: PoolClient, faults: ReplyFaults): PoolClient {
  return new Proxy(client, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (property === 'query') {
        const run = value as (...args: unknown[]) => Promise<unknown>;
        return async (...args: unknown[]) => {
          const reply = await run.apply(target, args);
          const operation = operationOf(args[0]);
          if (operation && faults.take(operation)) throw new Error('Connection terminated unexpectedly');
          return reply;
        };
      }
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** `pool`, with the commit and release statements of its clients subject to `faults`. */
export function replyDroppingPool(pool: Pool, faults: ReplyFaults): Pool {
  return new Proxy(pool, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (property === 'connect') {
        return async () => droppingClient(await target.connect(), faults);
      }
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}
