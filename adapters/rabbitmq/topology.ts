/**
 * The broker topology of one work queue: a pure plan built from the options, and the function
 * that declares or checks it on a channel.
 *
 * ```
 * producer ─▶ exchange ─▶ <queue> ──consume──▶ twophase
 *                          ▲   │ requeue(delay): publish copy, then ack
 *   TTL expiry, dead-      │   ▼
 *   lettered to <queue> ── <queue>.delay.<ms>ms   (one classic queue per delay tier)
 *                              │ reject: publish copy with reason headers, then ack
 *                              ▼
 *                          <queue>.dlx ─▶ <queue>.dlq
 * ```
 * The work queue's own `x-dead-letter-exchange` points at the same dead-letter exchange, so
 * messages the broker dead-letters by itself (a quorum queue's delivery limit, the fallback
 * `nack(requeue=false)`, a length limit) land in the same DLQ.
 */
import type { Channel } from 'amqplib';
import { ConfigurationError } from '../../src';
import { BrokerUnavailableError } from './errors';
import type { QueueBinding, QueueType, ResolvedSourceOptions, TopologyMode } from './options';

/** One queue to declare or check. */
export interface QueuePlan {
  readonly name: string;
  readonly arguments: Readonly<Record<string, unknown>>;
}

/** One delay tier's queue. */
export interface DelayQueuePlan extends QueuePlan {
  readonly delayMs: number;
}

/** Everything the source declares or checks. */
export interface TopologyPlan {
  readonly mode: TopologyMode;
  readonly workQueue: QueuePlan;
  readonly deadLetterExchange: string;
  readonly deadLetterRoutingKey: string;
  readonly deadLetterQueue: QueuePlan;
  readonly delayQueues: readonly DelayQueuePlan[];
  readonly bindings: readonly QueueBinding[];
}

/** Name of the delay queue of one tier: `<queue>.delay.<ms>ms`. */
export function delayQueueName(queue: string, delayMs: number): string {
  return `${queue}.delay.${delayMs}ms`;
}

/**
 * The tier a requeue of `delayMs` takes: the one nearest on a log scale (a tie takes the longer
 * tier); undefined for a delay ≤ 0, which goes straight back to the work queue.
 * @param tiersMs strictly increasing tiers, ms
 */
export function pickDelayTier(tiersMs: readonly number[], delayMs: number): number | undefined {
  if (!(delayMs > 0)) return undefined;
  let best = tiersMs[0]!;
  let bestDistance = Math.abs(Math.log(delayMs / best));
  for (const tier of tiersMs) {
    const distance = Math.abs(Math.log(delayMs / tier));
    if (distance <= bestDistance) {
      best = tier;
      bestDistance = distance;
    }
  }
  return best;
}

/** The plan for the resolved options. Pure. */
export function planTopology(o: ResolvedSourceOptions): TopologyPlan {
  const workArgs: Record<string, unknown> = { ...o.queueArguments, 'x-queue-type': o.queueType };
  if (!o.deadLetterViaPolicy) {
    workArgs['x-dead-letter-exchange'] = o.deadLetterExchange;
    workArgs['x-dead-letter-routing-key'] = o.deadLetterRoutingKey;
  }
  if (o.deliveryLimit !== undefined) workArgs['x-delivery-limit'] = o.deliveryLimit;
  return {
    mode: o.topology,
    workQueue: { name: o.queue, arguments: workArgs },
    deadLetterExchange: o.deadLetterExchange,
    deadLetterRoutingKey: o.deadLetterRoutingKey,
    deadLetterQueue: { name: o.deadLetterQueue, arguments: { 'x-queue-type': o.deadLetterQueueType } },
    delayQueues: o.delayTiersMs.map((delayMs) => ({
      name: delayQueueName(o.queue, delayMs),
      delayMs,
      // Queue-wide TTL: every message expires in arrival order, then is dead-lettered through the
      // default exchange back to the work queue ("Dead Letter Exchanges" docs).
      arguments: { 'x-queue-type': 'classic' satisfies QueueType, 'x-message-ttl': delayMs, 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': o.queue },
    })),
    bindings: o.bindings,
  };
}

/**
 * Declares (`declare` mode) or checks (`check` mode) the plan on a fresh channel from
 * `openChannel`, which is closed afterwards. A failed declare or check closes the channel on the
 * broker side, which is why the source never runs this on its consuming channel.
 *
 * In `declare` mode a failure leaves nothing behind that this call created: an existing work
 * queue is first checked against the plan (passively, then with its arguments on a throwaway
 * channel), so a queue without a dead-letter exchange is refused before anything is declared;
 * every other entity is looked up before it is declared, and those that did not exist are
 * deleted again (queues only while empty) when a later step fails. `removeCreatedOnFailure:
 * false` (re-declaring after a reconnect, when the topology was in place) skips those look-ups.
 *
 * @throws ConfigurationError when an entity is missing (`check`), exists with other arguments
 *   (broker 406 `inequivalent arg`), in particular a work queue without a dead-letter exchange,
 *   or access is refused
 * @throws BrokerUnavailableError when the connection fails meanwhile (retriable)
 */
export async function applyTopology(openChannel: () => Promise<Channel>, plan: TopologyPlan, options: { readonly removeCreatedOnFailure?: boolean } = {}): Promise<void> {
  const tracking = options.removeCreatedOnFailure ?? true;
  const open = async (): Promise<Channel> => {
    try {
      const opened = await openChannel();
      opened.on('error', () => undefined); // the rejection of the failed operation reports it
      return opened;
    } catch (error) {
      throw new BrokerUnavailableError('could not open a channel to declare the topology', { cause: error });
    }
  };
  /** Runs one operation on a throwaway channel (a failed one closes its channel). */
  const probe = async <T>(operation: (channel: Channel) => Promise<T>): Promise<T> => {
    const channel = await open();
    try {
      return await operation(channel);
    } finally {
      await channel.close().catch(() => undefined);
    }
  };
  /** True when the entity exists; false on 404. */
  const exists = (kind: 'queue' | 'exchange', name: string): Promise<boolean> =>
    probe((channel) => (kind === 'queue' ? channel.checkQueue(name) : channel.checkExchange(name))).then(
      () => true,
      (error: unknown) => {
        if ((error as { code?: unknown })?.code === 404) return false;
        throw error;
      },
    );
  const created: { kind: 'queue' | 'exchange'; name: string }[] = [];
  let step = '';
  if (plan.mode === 'declare' && tracking) {
    try {
      step = `queue "${plan.workQueue.name}"`;
      if (await exists('queue', plan.workQueue.name)) {
        await probe((channel) => channel.assertQueue(plan.workQueue.name, { durable: true, arguments: plan.workQueue.arguments }));
      }
    } catch (error) {
      throw topologyError(error, step, plan);
    }
  }
  const channel = await open();
  /** Declares an entity, remembering it when this call created it. */
  const declare = async (kind: 'queue' | 'exchange', name: string, declaration: () => Promise<unknown>): Promise<void> => {
    const builtIn = kind === 'exchange' && (name === '' || name.startsWith('amq.'));
    const isNew = tracking && !builtIn && !(await exists(kind, name));
    await declaration();
    if (isNew) created.push({ kind, name });
  };
  try {
    if (plan.mode === 'declare') {
      step = `exchange "${plan.deadLetterExchange}"`;
      await declare('exchange', plan.deadLetterExchange, () => channel.assertExchange(plan.deadLetterExchange, 'direct', { durable: true }));
      step = `queue "${plan.deadLetterQueue.name}"`;
      await declare('queue', plan.deadLetterQueue.name, () => channel.assertQueue(plan.deadLetterQueue.name, { durable: true, arguments: plan.deadLetterQueue.arguments }));
      step = `binding of "${plan.deadLetterQueue.name}" to "${plan.deadLetterExchange}"`;
      await channel.bindQueue(plan.deadLetterQueue.name, plan.deadLetterExchange, plan.deadLetterRoutingKey);
      for (const delay of plan.delayQueues) {
        step = `queue "${delay.name}"`;
        await declare('queue', delay.name, () => channel.assertQueue(delay.name, { durable: true, arguments: delay.arguments }));
      }
      step = `queue "${plan.workQueue.name}"`;
      await declare('queue', plan.workQueue.name, () => channel.assertQueue(plan.workQueue.name, { durable: true, arguments: plan.workQueue.arguments }));
      for (const b of plan.bindings) {
        step = `exchange "${b.exchange}"`;
        await declare('exchange', b.exchange, () => channel.assertExchange(b.exchange, b.exchangeType ?? 'direct', { durable: true }));
        step = `binding of "${plan.workQueue.name}" to "${b.exchange}" with "${b.routingKey}"`;
        await channel.bindQueue(plan.workQueue.name, b.exchange, b.routingKey);
      }
    } else {
      step = `exchange "${plan.deadLetterExchange}"`;
      await channel.checkExchange(plan.deadLetterExchange);
      step = `queue "${plan.deadLetterQueue.name}"`;
      await channel.checkQueue(plan.deadLetterQueue.name);
      for (const delay of plan.delayQueues) {
        step = `queue "${delay.name}"`;
        await channel.checkQueue(delay.name);
        // Re-declaring with the same arguments is a no-op; other arguments fail with 406.
        await channel.assertQueue(delay.name, { durable: true, arguments: delay.arguments });
      }
      step = `queue "${plan.workQueue.name}"`;
      await channel.checkQueue(plan.workQueue.name);
      await channel.assertQueue(plan.workQueue.name, { durable: true, arguments: plan.workQueue.arguments });
    }
  } catch (error) {
    await removeCreated(open, created);
    throw topologyError(error, step, plan);
  } finally {
    await channel.close().catch(() => undefined);
  }
}

/**
 * Deletes what a failed declare created, newest first: queues only while empty, exchanges with
 * their bindings. Best effort: a failure here leaves the entity (the declare's error is what the
 * caller reports).
 */
async function removeCreated(open: () => Promise<Channel>, created: readonly { kind: 'queue' | 'exchange'; name: string }[]): Promise<void> {
  for (const { kind, name } of [...created].reverse()) {
    let channel: Channel | undefined;
    try {
      channel = await open();
      if (kind === 'queue') await channel.deleteQueue(name, { ifEmpty: true });
      // Its bindings are the ones this declare made (it did not exist before): they go with it.
      else await channel.deleteExchange(name);
    } catch {
      // left in place
    } finally {
      await channel?.close().catch(() => undefined);
    }
  }
}

/**
 * Maps a broker error of a topology step to a typed error. Exported for tests.
 */
export function topologyError(error: unknown, step: string, plan: TopologyPlan): Error {
  const code = (error as { code?: unknown })?.code;
  const text = error instanceof Error ? error.message : String(error);
  if (code === 406) {
    if (/inequivalent arg 'x-dead-letter-exchange'.*current is none/s.test(text)) {
      return new ConfigurationError(
        `queue "${plan.workQueue.name}" has no dead-letter exchange: a reject would drop the message, so twophase refuses to consume it. ` +
          `Re-create the queue with x-dead-letter-exchange="${plan.deadLetterExchange}" (twophase declares it so), or set deadLetterViaPolicy ` +
          `if a policy sets dead-letter-exchange. Broker said: ${text}`,
        { cause: error },
      );
    }
    return new ConfigurationError(
      `${step} exists with other arguments than twophase would declare (${plan.mode} mode); align the options (queueType, deliveryLimit, ` +
        `deadLetterExchange, deadLetterRoutingKey, delayTiersMs, queueArguments) with the existing entity or re-create it. Broker said: ${text}`,
      { cause: error },
    );
  }
  if (code === 404) {
    return new ConfigurationError(`${step} does not exist (topology: '${plan.mode}'); declare it, or use topology: 'declare'. Broker said: ${text}`, { cause: error });
  }
  if (code === 403) return new ConfigurationError(`access refused on ${step}: ${text}`, { cause: error });
  return new BrokerUnavailableError(`topology ${plan.mode} failed at ${step}: ${text}`, { cause: error });
}
