/**
 * One function classifies every error the Redis client or server gives the claimer: a fault of
 * the deployment (a configuration to fix) or a transient store failure (retry later). Twophase's
 * own errors pass through unchanged.
 */
import { ClaimerUnavailableError, ConfigurationError, TwophaseError } from '../../src';

/**
 * Server replies that no retry can fix, by their first word
 * (https://redis.io/docs/latest/develop/reference/protocol-spec/#simple-errors):
 * - `CROSSSLOT`: the keys of one call hash to different slots — a plain client on a cluster node,
 *   or a layout without hash tags;
 * - `MOVED`/`ASK` reaching the claimer: a plain `Redis` client talking to a cluster node, which
 *   only a `Cluster` client follows;
 * - `WRONGTYPE`: another application's data under the claimer's prefix;
 * - `NOPERM`: the ACL user may not run the scripts or touch the prefix.
 */
const CONFIGURATION_REPLIES: Readonly<Record<string, string>> = {
  CROSSSLOT: 'the keys of one script call hash to different Redis Cluster slots; pass an ioredis Cluster client for a cluster',
  MOVED: 'a Redis Cluster node redirected the call; pass an ioredis Cluster client, not a plain Redis client',
  ASK: 'a Redis Cluster node redirected the call; pass an ioredis Cluster client, not a plain Redis client',
  WRONGTYPE: 'a key under the claimer prefix holds another type of data; choose a prefix no other data uses',
  NOPERM: 'the Redis ACL user lacks a permission the claimer needs (EVALSHA, EVAL, GET/SET/PTTL on the prefix, TIME)',
};

/**
 * Turns any error from an operation on `what` into a twophase error:
 * - a {@link TwophaseError} is returned as is;
 * - the replies listed above become {@link ConfigurationError} (not retriable);
 * - everything else — connection refused or reset, the client not ready, `READONLY` after a
 *   failover, `LOADING`, `BUSY`, `MASTERDOWN`, `CLUSTERDOWN`, `TRYAGAIN`, `OOM`, ioredis's
 *   `MaxRetriesPerRequestError`, deadlines — becomes a retriable {@link ClaimerUnavailableError}:
 *   the claim store failed, and the caller must not guess a state.
 */
export function toClaimerError(error: unknown, what: string): TwophaseError {
  if (error instanceof TwophaseError) return error;
  const message = error instanceof Error ? error.message : String(error);
  const word = firstWord(message);
  // A script error wraps the server's reply: "ERR user_script:12: WRONGTYPE Operation against..."
  const inner = /:\s*([A-Z]{3,})\b/.exec(message)?.[1];
  const reason = CONFIGURATION_REPLIES[word] ?? (inner ? CONFIGURATION_REPLIES[inner] : undefined);
  if (reason) return new ConfigurationError(`${what}: ${reason} (Redis said: ${message})`, { cause: error });
  return new ClaimerUnavailableError(`${what}: Redis unavailable: ${message}`, { cause: error });
}

function firstWord(message: string): string {
  const space = message.indexOf(' ');
  return space === -1 ? message : message.slice(0, space);
}
