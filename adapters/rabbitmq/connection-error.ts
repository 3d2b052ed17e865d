/**
 * Why a connection to RabbitMQ could not be opened, in words and as a typed error that names the
 * host and the cause. Shared by {@link RabbitMqSource} and the `twophase` CLI.
 */
import { BrokerUnavailableError } from './errors';

/**
 * Cause of a failed connect:
 * - `ECONNREFUSED`: nothing listens on that host and port (broker down or wrong port);
 * - `ENOTFOUND`: the host name does not resolve;
 * - `ETIMEDOUT` / `EHOSTUNREACH` / `ENETUNREACH`: the host does not answer;
 * - `ACCESS_REFUSED`: the broker refused the user name or password (AMQP reply 403);
 * - `VHOST_NOT_FOUND`: the virtual host does not exist or the user may not open it (AMQP reply
 *   530 NOT_ALLOWED at `connection.open`);
 * - `OTHER`: anything else (the cause's message says what).
 */
export type ConnectFailureReason = 'ECONNREFUSED' | 'ENOTFOUND' | 'ETIMEDOUT' | 'EHOSTUNREACH' | 'ENETUNREACH' | 'ACCESS_REFUSED' | 'VHOST_NOT_FOUND' | 'OTHER';

/** Where a connect went, from an AMQP URL, without the credentials. */
export interface AmqpEndpoint {
  readonly host: string;
  readonly port: number;
  readonly vhost: string;
}

/** Host, port (default 5672, 5671 for amqps) and vhost (default `/`) of an AMQP URL. */
export function amqpEndpoint(url: string): AmqpEndpoint {
  try {
    const parsed = new URL(url);
    const tls = parsed.protocol === 'amqps:';
    const path = parsed.pathname.replace(/^\//, '');
    return { host: parsed.hostname, port: parsed.port === '' ? (tls ? 5671 : 5672) : Number(parsed.port), vhost: path === '' ? '/' : decodeURIComponent(path) };
  } catch {
    return { host: '?', port: 0, vhost: '?' };
  }
}

/** Classifies a connect error of amqplib (or of amqp-connection-manager, which passes amqplib's on). */
export function connectFailureReason(error: unknown): ConnectFailureReason {
  const code = (error as { code?: unknown } | undefined)?.code;
  if (code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'ETIMEDOUT' || code === 'EHOSTUNREACH' || code === 'ENETUNREACH') return code;
  const text = error instanceof Error ? error.message : String(error);
  if (/ACCESS[-_]REFUSED|\b403\b/.test(text)) return 'ACCESS_REFUSED';
  // amqplib 0.10 reports a refused connection.open only as "Expected ConnectionOpenOk; got
  // <ConnectionClose …>"; newer ones carry the broker's text (530 NOT_ALLOWED - vhost … not found).
  if (/NOT[-_]ALLOWED|vhost .* not found|Expected ConnectionOpenOk; got <ConnectionClose/i.test(text)) return 'VHOST_NOT_FOUND';
  if (/EAI_AGAIN/.test(text)) return 'ENOTFOUND';
  return 'OTHER';
}

/** True when trying again cannot help without a configuration change (credentials, vhost). */
export function isPermanentConnectFailure(reason: ConnectFailureReason): boolean {
  return reason === 'ACCESS_REFUSED' || reason === 'VHOST_NOT_FOUND';
}

function explain(reason: ConnectFailureReason, endpoint: AmqpEndpoint, error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  switch (reason) {
    case 'ECONNREFUSED':
      return `ECONNREFUSED: nothing accepts connections on ${endpoint.host}:${endpoint.port} (broker down or wrong port)`;
    case 'ENOTFOUND':
      return `ENOTFOUND: the host name "${endpoint.host}" does not resolve`;
    case 'ETIMEDOUT':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return `${reason}: ${endpoint.host}:${endpoint.port} does not answer`;
    case 'ACCESS_REFUSED':
      return `ACCESS-REFUSED: the broker refused the user name or password (${text})`;
    case 'VHOST_NOT_FOUND':
      return `vhost not found: the broker refused to open virtual host "${endpoint.vhost}" (it does not exist, or the user has no access to it)`;
    default:
      return text;
  }
}

/**
 * No connection to RabbitMQ could be opened. Names the host, port, vhost and cause, and keeps
 * the last error as `cause`. Retriable, except for `ACCESS_REFUSED` and `VHOST_NOT_FOUND`.
 */
export class BrokerConnectionError extends BrokerUnavailableError {
  readonly host: string;
  readonly port: number;
  readonly vhost: string;
  readonly reason: ConnectFailureReason;
  /** Connection attempts made before giving up. */
  readonly attempts: number;

  constructor(url: string, error: unknown, details: { readonly attempts: number; readonly elapsedMs?: number }) {
    const endpoint = amqpEndpoint(url);
    const reason = connectFailureReason(error);
    const after = details.elapsedMs === undefined ? '' : ` (${details.attempts} attempt(s) in ${details.elapsedMs} ms)`;
    super(`could not connect to RabbitMQ at ${endpoint.host}:${endpoint.port} vhost "${endpoint.vhost}": ${explain(reason, endpoint, error)}${after}`, { cause: error });
    this.host = endpoint.host;
    this.port = endpoint.port;
    this.vhost = endpoint.vhost;
    this.reason = reason;
    this.attempts = details.attempts;
    if (isPermanentConnectFailure(reason)) (this as { retriable: boolean }).retriable = false;
  }
}
