/**
 * Fault injection on the local RabbitMQ through `rabbitmqctl` (needs root, as on CI). The
 * management plugin is not enabled on the test machine, so connections are closed with
 * `rabbitmqctl eval`, selected by their client-provided connection name: the same server-side
 * `connection.close` (320 CONNECTION_FORCED) as `rabbitmqctl close_all_connections`, without
 * touching other suites' connections.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

async function rabbitmqctl(args: string[]): Promise<string> {
  const { stdout } = await run('rabbitmqctl', args, { timeout: 30_000 });
  return stdout.trim();
}

/** True when `rabbitmqctl` can talk to the local node. */
export async function rabbitmqctlAvailable(): Promise<boolean> {
  try {
    await rabbitmqctl(['eval', 'ok.']);
    return true;
  } catch {
    return false;
  }
}

/**
 * For suites that inject faults with `rabbitmqctl`: resolves whether it is available, and fails
 * (rejects) under `CI`, where the fault tests must run.
 */
export async function requireRabbitmqctl(): Promise<boolean> {
  const available = await rabbitmqctlAvailable();
  if (!available && process.env.CI) throw new Error('rabbitmqctl is required under CI (fault injection)');
  return available;
}

function erlangBinary(text: string): string {
  if (!/^[A-Za-z0-9._:-]+$/.test(text)) throw new Error(`unsafe name for rabbitmqctl eval: ${text}`);
  return `<<"${text}">>`;
}

/**
 * Force-closes every connection whose client-provided name starts with `prefix` (a source's
 * consuming connection `<name>` and its publishing connection `<name>:publish`). Resolves with
 * how many were closed.
 */
export async function closeConnectionsNamed(prefix: string, reason = 'closed by twophase test'): Promise<number> {
  const out = await rabbitmqctl([
    'eval',
    `Prefix = ${erlangBinary(prefix)}, ` +
      'Named = fun(P) -> case lists:keyfind(<<"connection_name">>, 1, proplists:get_value(client_properties, rabbit_networking:connection_info(P, [client_properties]), [])) of ' +
      '{_, longstr, N} -> binary:longest_common_prefix([N, Prefix]) =:= byte_size(Prefix); _ -> false end end, ' +
      'Ps = [P || P <- rabbit_networking:connections(), Named(P)], ' +
      `[rabbit_networking:close_connection(P, "${reason.replace(/[^A-Za-z0-9 ._-]/g, '')}") || P <- Ps], length(Ps).`,
  ]);
  return Number(out);
}

/** RabbitMQ version of the local node, for example `3.10.8`. */
export async function brokerVersion(): Promise<string> {
  const out = await rabbitmqctl(['eval', 'rabbit:base_product_version().']);
  return out.replace(/[^0-9.]/g, '');
}

/**
 * Runs `open` while the node's `consumer_timeout` is `timeoutMs`, so channels opened inside it
 * get that delivery-acknowledgement timeout ("Delivery Acknowledgement Timeout" in the
 * Consumers docs). Before 3.12 the timeout is node-wide (the queue argument `x-consumer-timeout`
 * came in 3.12) and each channel reads it when it opens; the broker checks it on the channel
 * tick, so the tick interval is lowered to 1 s until `restore` is called. The node-wide value is
 * restored as soon as `open` resolves, so other connections are affected only in that window.
 */
export async function withConsumerTimeout<T>(timeoutMs: number, open: () => Promise<T>): Promise<{ value: T; restore: () => Promise<void> }> {
  const originalTimeout = await rabbitmqctl(['eval', 'application:get_env(rabbit, consumer_timeout).']);
  const originalTick = await rabbitmqctl(['eval', 'application:get_env(rabbit, channel_tick_interval).']);
  const restoreTimeout = /\{ok,(\d+)\}/.exec(originalTimeout)?.[1];
  const restoreTick = /\{ok,(\d+)\}/.exec(originalTick)?.[1];
  await rabbitmqctl(['eval', `application:set_env(rabbit, consumer_timeout, ${Math.floor(timeoutMs)}), application:set_env(rabbit, channel_tick_interval, 1000).`]);
  const restoreTimeoutNow = () =>
    rabbitmqctl(['eval', restoreTimeout ? `application:set_env(rabbit, consumer_timeout, ${restoreTimeout}).` : 'application:unset_env(rabbit, consumer_timeout).']);
  let value: T;
  try {
    value = await open();
  } finally {
    await restoreTimeoutNow();
  }
  return {
    value,
    restore: async () => {
      await rabbitmqctl(['eval', restoreTick ? `application:set_env(rabbit, channel_tick_interval, ${restoreTick}).` : 'application:unset_env(rabbit, channel_tick_interval).']);
    },
  };
}
