/**
 * Lost replies at the Redis client boundary for the claimer conformance suite: a view of an
 * ioredis client whose `evalsha` / `eval` of the commit or release script runs on the server as
 * usual, then rejects with the error ioredis gives when the connection closes with a reply
 * outstanding ("Connection is closed."), when a drop is armed.
 */
import type { Cluster, Redis } from 'ioredis';
import { SCRIPTS } from '../../../../adapters/redis/script-loader';
import { type ReplyFaults, type ReplyOperation } from '../../../conformance/reply-faults';

function operationOf(shaOrSource: unknown): ReplyOperation | undefined {
  if (shaOrSource === SCRIPTS.commit.sha || shaOrSource === SCRIPTS.commit.source) return 'commit';
  if (shaOrSource === SCRIPTS.release.sha || shaOrSource === SCRIPTS.release.source) return 'release';
  return undefined;
}

/** `client`, with the commit and release script calls subject to `faults`. */
export function replyDroppingClient<T extends Redis | Cluster>(client: T, faults: ReplyFaults): T {
  return new Proxy(client, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (property === 'evalsha' || property === 'eval') {
        const run = value as (...args: unknown[]) => Promise<unknown>;
        return async (...args: unknown[]) => {
          const reply = await run.apply(target, args);
          const operation = operationOf(args[0]);
          if (operation && faults.take(operation)) throw new Error('Connection is closed.');
          return reply;
        };
      }
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}
