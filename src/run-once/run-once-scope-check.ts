/**
 * The scope rule of `runOnce` for HTTP requests: a stored response is handed to whoever presents
 * its key in the same scope. Without an actor or a tenant in the scope, anyone who learns a key
 * (a log line, a shared client, a guess) gets the response stored for another caller. This check
 * logs one warning per claimer the first time an HTTP-style operation runs without either.
 */
import type { Claimer } from '../claim/claimer';
import type { Logger } from '../util/logger';
import type { RunOnceScope } from './run-once-key';

/** An operation named like an HTTP request: a method, a space, then a path (`POST /payments`). */
const HTTP_OPERATION = /^(GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS)\s+\//i;

/** Claimers that already had the warning (one line per claimer, not per request). */
const warned = new WeakSet<Claimer>();

/**
 * Logs a warning, once per claimer, when `scope` names an HTTP-style operation and binds neither
 * an actor nor a tenant. Job-style operations (`job:send-invoices`) are left alone: their keys
 * are chosen by the application, not sent by callers.
 */
export function warnUnscopedHttpOnce(claimer: Claimer, scope: RunOnceScope, logger: Logger): void {
  if (scope.actor !== undefined || scope.tenant !== undefined) return;
  if (!HTTP_OPERATION.test(scope.operation) || warned.has(claimer)) return;
  warned.add(claimer);
  logger.warn(
    { operation: scope.operation },
    `runOnce: operation "${scope.operation}" has no actor and no tenant in its scope, so any caller who presents a key gets the response stored for it; ` +
      'bind the caller (scope.actor) or the tenant (scope.tenant). Logged once per claimer',
  );
}
