/**
 * The outbox relay: claims staged messages from an {@link OutboxStore} under a lease with a
 * fencing token, publishes them through an {@link OutboxPublisher}, and removes each one only
 * after the broker confirmed it.
 *
 * One cycle ({@link OutboxRelay.relayOnce}):
 * 1. claim up to `batchSize` rows (the store hands out, per ordering key, only the oldest row and
 *    those after it, never past a key whose older row is leased, waiting or held dead);
 * 2. publish: the rows of one ordering key one after the other in staging order, each awaited to
 *    its broker confirm; `keyConcurrency` keys at a time. Meanwhile the lease is extended every
 *    `extendIntervalMs`; a row the store says is no longer held is not published;
 * 3. settle under the claim's token: confirmed rows are deleted; a failed row gets its backoff or
 *    goes dead; the rest of its key is given back untouched (never published out of order).
 * `claimConcurrency` cycles run at once (default 2): while one waits on the broker, the next is
 * claimed and published. The store never hands a key to a second claim while an older row of it
 * is in the table, so this changes no key's order.
 * A crash anywhere leaves rows leased until `leaseMs` runs out; another relay then publishes them
 * again under the same ids (at least once; downstream twophase consumers deduplicate).
 */
import { randomUUID } from 'node:crypto';
import type { ConsumerHealth, ConsumerState } from '../consumer/consumer-base';
import { ConfigurationError, TwophaseError } from '../util/errors';
import { checkKnownOptions, describeType } from '../util/known-options';
import { consoleInfoLogger, guardLogger, type Logger } from '../util/logger';
import { backoffDelay } from '../util/retry';
import type { RunnableConsumer } from '../consumer/runner';
import { truncateErrorMessage } from '../claim/settlement';
import type { OutboxSystem } from '../outbox/outbox-message';
import type { OutboxClaim, OutboxFailure, OutboxNotifier, OutboxPublisher, OutboxPublishTracer, OutboxRecord, OutboxStats, OutboxStore, OutboxSubscription, PublishFailureClass } from '../outbox/ports';
import { OUTBOX_RELAY_OPTION_NAMES, type OutboxRelayOptions, type ResolvedOutboxRelayOptions, resolveRelayOptions } from './relay-options';

/** What a relay uses and does not own. */
export interface OutboxRelayDependencies {
  /** The outbox table (`PostgresOutboxStore` from `twophase/postgres`). */
  readonly store: OutboxStore;
  /**
   * The broker(s): `RabbitMqOutboxPublisher` (`twophase/rabbitmq`), `KafkaOutboxPublisher`
   * (`twophase/kafka`), or both (at most one per broker). The relay starts and closes them.
   */
  readonly publisher: OutboxPublisher | readonly OutboxPublisher[];
  /** Wake-up on commit (`PostgresOutboxNotifier`); without it the relay polls every `pollIntervalMs`. */
  readonly notifier?: OutboxNotifier;
  /**
   * pino-compatible. Default: info, warn and error as JSON lines on stderr (`consoleInfoLogger`,
   * as a consumer's): the start line is info.
   */
  readonly logger?: Logger;
  /** Told of each step (metrics, tracing, tests). Its errors are logged and ignored. */
  readonly observer?: OutboxRelayObserver;
  /**
   * Wraps each publish: `createOutboxRelayTracer()` from `twophase/otel` gives each message a
   * PRODUCER span linked to the trace context staged in its headers, and sends the span's context
   * in the published headers. Default: none (headers sent as staged).
   */
  readonly tracer?: OutboxPublishTracer;
}

/**
 * A step of the relay:
 * - `claimed`: rows leased under `fencingToken` (nothing published yet);
 * - `published`: the broker confirmed one message (its row not yet removed);
 * - `failed`: a publish failed; `dead` when the message will not be tried again;
 * - `completed`: confirmed rows removed from the outbox (`removed` of `ids`; fewer when another
 *   relay took some over);
 * - `lease_lost`: rows the store no longer holds for this relay (not published from now on).
 */
export type OutboxRelayEvent =
  | { readonly type: 'claimed'; readonly fencingToken: number; readonly ids: readonly string[] }
  | { readonly type: 'published'; readonly fencingToken: number; readonly record: OutboxRecord }
  | { readonly type: 'failed'; readonly fencingToken: number; readonly record: OutboxRecord; readonly reason: string; readonly dead: boolean; readonly error: unknown }
  | { readonly type: 'completed'; readonly fencingToken: number; readonly ids: readonly string[]; readonly removed: number }
  | { readonly type: 'lease_lost'; readonly fencingToken: number; readonly sequences: readonly string[] };

/** Receives {@link OutboxRelayEvent}s, synchronously, in order. */
export interface OutboxRelayObserver {
  onEvent(event: OutboxRelayEvent): void;
}

/** {@link OutboxRelay.health}: the runner's consumer health plus the relay's counts. */
export interface OutboxRelayHealth extends ConsumerHealth {
  /** Messages this relay published and saw confirmed since it started. */
  readonly published: number;
  /** Failed publishes since it started (each retry counts). */
  readonly publishFailures: number;
  /**
   * The store's counts as last read: once before `start()` resolves, every `statsIntervalMs`, and
   * after a poll while messages are pending or the relay saw a change (a claim, a notification), at
   * most once per `pollIntervalMs` and no sooner than ten times the last read's duration.
   * Undefined with `statsIntervalMs: 0`, or while no read has succeeded.
   */
  readonly stats: OutboxStats | undefined;
  /** True while a notifier subscription is live (false: polling only). */
  readonly listening: boolean;
}

/** What one {@link OutboxRelay.relayOnce} did. */
export interface RelayCycle {
  readonly claimed: number;
  readonly published: number;
  readonly failed: number;
  /** Given back unpublished (behind a failure of their key, lease lost, or stopping). */
  readonly released: number;
}

const DEPENDENCY_NAMES = ['store', 'publisher', 'notifier', 'logger', 'observer', 'tracer'];

/**
 * Publishes the outbox. Runs alone (`start()` / `stop()`, the CLI's `twophase outbox relay`) or
 * with consumers: `runConsumers([consumer, relay])` starts it, stops it on SIGTERM and reports
 * its health beside theirs.
 *
 * ```ts
 * const relay = new OutboxRelay({ store: new PostgresOutboxStore({ pool }), publisher: new RabbitMqOutboxPublisher({ url }), notifier: new PostgresOutboxNotifier({ pool }) });
 * await relay.start();
 * ```
 */
export class OutboxRelay implements RunnableConsumer {
  readonly options: ResolvedOutboxRelayOptions;
  private readonly store: OutboxStore;
  private readonly publishers: ReadonlyMap<OutboxSystem, OutboxPublisher>;
  private readonly notifier: OutboxNotifier | undefined;
  private readonly logger: Logger;
  private readonly observer: OutboxRelayObserver | undefined;
  private readonly tracer: OutboxPublishTracer | undefined;
  /** Unique per instance: the lease owner. */
  readonly owner: string;
  private state: ConsumerState = 'created';
  private loopDone: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;
  private stopRequested = false;
  /** Lanes waiting in `idle()`; a notification wakes them all. */
  private readonly waiters = new Set<() => void>();
  private woken = false;
  private subscription: OutboxSubscription | undefined;
  private listening = false;
  private inFlight = 0;
  private published = 0;
  private publishFailures = 0;
  private lastStats: OutboxStats | undefined;
  private statsTimer: NodeJS.Timeout | undefined;
  /** The read of the store's counts in progress, if any (one at a time). */
  private statsReading: Promise<void> | undefined;
  /** When the last read started (`performance.now()`, ms). */
  private statsReadStartedAt = Number.NEGATIVE_INFINITY;
  /** How long the last read took, ms: reads after polls are spaced by at least ten times this. */
  private statsReadMs = 0;
  /** The relay claimed rows or was notified since the last read started: its counts may be out of date. */
  private statsChanged = false;
  /** The claims being published and their rows still held, so `stop()` can give them back. */
  private readonly current = new Set<CurrentClaim>();

  /**
   * @throws ConfigurationError for a missing store or publisher, two publishers of one broker, an observer or tracer of the wrong shape, or an invalid option
   */
  constructor(dependencies: OutboxRelayDependencies, options: OutboxRelayOptions = {}) {
    if (!dependencies || typeof dependencies !== 'object') throw new ConfigurationError(`OutboxRelay dependencies must be { store, publisher, notifier?, logger? }, got ${describeType(dependencies)}`);
    const misplaced = Object.keys(dependencies).find((name) => OUTBOX_RELAY_OPTION_NAMES.includes(name));
    if (misplaced !== undefined) {
      throw new ConfigurationError(`OutboxRelay: "${misplaced}" is an option, not a dependency: pass options as the second argument, new OutboxRelay({ store, publisher }, { ${misplaced}: … })`);
    }
    checkKnownOptions('OutboxRelay dependencies', dependencies, DEPENDENCY_NAMES);
    if (!dependencies.store || typeof dependencies.store.claim !== 'function') throw new ConfigurationError('OutboxRelay needs a store (for example new PostgresOutboxStore({ pool }))');
    const list = Array.isArray(dependencies.publisher) ? (dependencies.publisher as readonly OutboxPublisher[]) : [dependencies.publisher as OutboxPublisher];
    const publishers = new Map<OutboxSystem, OutboxPublisher>();
    for (const p of list) {
      if (!p || typeof p.publish !== 'function') throw new ConfigurationError(`OutboxRelay publisher must have publish(record), got ${describeType(p)}`);
      if (publishers.has(p.system)) throw new ConfigurationError(`OutboxRelay was given two publishers for ${p.system}: pass one per broker`);
      publishers.set(p.system, p);
    }
    if (publishers.size === 0) throw new ConfigurationError('OutboxRelay needs at least one publisher');
    this.options = resolveRelayOptions(options);
    this.store = dependencies.store;
    this.publishers = publishers;
    this.notifier = dependencies.notifier;
    this.logger = guardLogger(dependencies.logger ?? consoleInfoLogger);
    if (dependencies.observer !== undefined && typeof dependencies.observer?.onEvent !== 'function') throw new ConfigurationError(`OutboxRelay observer must have onEvent(event), got ${describeType(dependencies.observer)}`);
    this.observer = dependencies.observer;
    if (dependencies.tracer !== undefined && typeof dependencies.tracer?.tracePublish !== 'function') throw new ConfigurationError(`OutboxRelay tracer must have tracePublish(record, publish), got ${describeType(dependencies.tracer)}`);
    this.tracer = dependencies.tracer;
    this.owner = `${this.options.name}:${randomUUID()}`;
  }

  /** The runner's exit deadline accounts for it. */
  get shutdownTimeoutMs(): number {
    return this.options.shutdownTimeoutMs;
  }

  /**
   * Checks the store's schema, starts the publishers and the notifier (a notifier that fails to
   * listen is logged, and the relay polls), reads the store's counts for `health().stats` (unless
   * `statsIntervalMs` is 0; a failed read is logged), then runs the relay loop until `stop()`.
   * Once running, logs one info line, `twophase: outbox relay started`, with the relay's name, the
   * outbox table (`outbox`, when the store describes itself), the brokers (`systems`), whether it
   * listens for notifications, and `batchSize`, `claimConcurrency`, `keyConcurrency`, `pollIntervalMs`.
   * @throws the store's schema error (for example `SchemaMismatchError`) or a publisher's connect error; the relay is then `failed`
   */
  async start(): Promise<void> {
    if (this.state !== 'created') throw new ConfigurationError(`OutboxRelay.start() called in state ${this.state}; a relay starts once`);
    this.state = 'starting';
    try {
      await this.store.ready?.();
      for (const p of this.publishers.values()) await p.start?.();
    } catch (error) {
      this.state = 'failed';
      await this.closePublishers();
      throw error;
    }
    await this.listen();
    if (this.stopRequested) return;
    if (this.options.statsIntervalMs > 0) {
      // Before the loop: health() has the counts of the table as the relay found it.
      await this.refreshStats();
      if (this.stopRequested) return;
      this.statsTimer = setInterval(() => void this.refreshStats(), this.options.statsIntervalMs);
      this.statsTimer.unref();
    }
    this.state = 'running';
    this.loopDone = this.loop();
    this.logger.info(
      {
        relay: this.options.name,
        ...(this.store.describe ? { outbox: this.store.describe() } : {}),
        systems: [...this.publishers.keys()],
        listening: this.listening,
        batchSize: this.options.batchSize,
        claimConcurrency: this.options.claimConcurrency,
        keyConcurrency: this.options.keyConcurrency,
        pollIntervalMs: this.options.pollIntervalMs,
      },
      'twophase: outbox relay started',
    );
  }

  /**
   * Stops claiming, lets publishes in flight finish for up to `shutdownTimeoutMs` (their rows are
   * then deleted as usual), gives back the leases of everything not confirmed by then, closes the
   * notifier and the publishers. Never throws; safe to repeat (later calls share the first one's promise).
   */
  stop(): Promise<void> {
    this.stopping ??= this.stopNow();
    return this.stopping;
  }

  private async stopNow(): Promise<void> {
    this.stopRequested = true;
    if (this.state === 'running' || this.state === 'starting') this.state = 'stopping';
    if (this.statsTimer) clearInterval(this.statsTimer);
    for (const done of [...this.waiters]) done();
    if (this.loopDone) {
      const timedOut = await raceTimeout(this.loopDone, this.options.shutdownTimeoutMs);
      if (timedOut) await Promise.all([...this.current].map((c) => this.giveBack(c, 'stop() passed shutdownTimeoutMs')));
    }
    // A read of the counts in progress ends before stop() resolves (the caller may end the pool next).
    await this.statsReading;
    await this.subscription?.close().catch((error: unknown) => this.logger.warn({ relay: this.options.name, err: error }, 'outbox relay: closing the notifier failed'));
    this.listening = false;
    await this.closePublishers();
    if (this.state !== 'failed') this.state = 'stopped';
  }

  /** Liveness and readiness for the runner, with the relay's counts. */
  health(): OutboxRelayHealth {
    return {
      name: this.options.name,
      state: this.state,
      live: this.state !== 'failed',
      ready: this.state === 'running',
      inFlight: this.inFlight,
      deadLetters: this.lastStats?.dead ?? {},
      // The consumer counts, read for a relay: a commit is a publish confirmed and its row deleted;
      // a retry is a failed publish that will be tried again. A relay meets no duplicates or busy keys.
      commits: this.published,
      duplicatesSkipped: 0,
      busyRequeues: 0,
      retries: this.publishFailures,
      published: this.published,
      publishFailures: this.publishFailures,
      stats: this.lastStats,
      listening: this.listening,
    };
  }

  /** The store's counts now: pending, the oldest pending message's age (lag), leased, dead by reason. */
  stats(): Promise<OutboxStats> {
    return this.store.stats();
  }

  /**
   * One cycle: claim a batch, publish it, settle it. The loop started by `start()` calls it; a test
   * or a one-shot job can call it directly (without `start()`: call the publishers' `start()` first).
   * @throws the store's error when the claim fails (nothing was leased); errors after the claim
   *   are logged, and the rows concerned stay leased until their lease runs out
   */
  async relayOnce(): Promise<RelayCycle> {
    const claim = await this.store.claim({
      owner: this.owner,
      limit: this.options.batchSize,
      leaseMs: this.options.leaseMs,
      systems: [...this.publishers.keys()],
      deadKeyPolicy: this.options.deadKeyPolicy,
    });
    if (claim.records.length === 0) return { claimed: 0, published: 0, failed: 0, released: 0 };
    this.statsChanged = true;
    // A full batch: more is likely waiting; a lane of the loop that is idle claims it meanwhile.
    if (claim.records.length >= this.options.batchSize && this.waiters.size > 0) this.wakeUp();
    if (this.observer) this.emit({ type: 'claimed', fencingToken: claim.lease.fencingToken, ids: claim.records.map((r) => r.id) });
    const held = new Set(claim.records.map((r) => r.sequence));
    const keeper = new LeaseExtender(this.store, claim, held, this.options, this.logger, (sequences) => this.emit({ type: 'lease_lost', fencingToken: claim.lease.fencingToken, sequences }));
    const current: CurrentClaim = { claim, held, settled: false, keeper };
    this.current.add(current);
    this.inFlight += claim.records.length;
    const confirmed: string[] = [];
    const failures: OutboxFailure[] = [];
    try {
      const runs = [...byOrderingKey(claim.records)];
      let next = 0;
      const worker = async (): Promise<void> => {
        while (next < runs.length) {
          const run = runs[next++]!;
          for (const record of run) {
            if (this.stopRequested || !held.has(record.sequence)) break;
            try {
              await this.publish(record);
              confirmed.push(record.sequence);
              this.published++;
              if (this.observer) this.emit({ type: 'published', fencingToken: claim.lease.fencingToken, record });
            } catch (error) {
              this.publishFailures++;
              const failure = this.failureOf(record, error);
              failures.push(failure);
              this.emit({ type: 'failed', fencingToken: claim.lease.fencingToken, record, reason: failure.reason, dead: failure.retryInMs === undefined, error });
              break;
            }
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(this.options.keyConcurrency, runs.length) }, worker));
    } finally {
      await keeper.stop();
      this.inFlight -= claim.records.length;
    }
    if (current.settled) return { claimed: claim.records.length, published: confirmed.length, failed: failures.length, released: 0 };
    current.settled = true;
    this.current.delete(current);
    const done = new Set(confirmed);
    for (const f of failures) done.add(f.sequence);
    const rest = done.size === claim.records.length ? [] : claim.records.map((r) => r.sequence).filter((s) => !done.has(s));
    await this.settle(claim, confirmed, failures, rest);
    return { claimed: claim.records.length, published: confirmed.length, failed: failures.length, released: rest.length };
  }

  private async settle(claim: OutboxClaim, confirmed: readonly string[], failures: readonly OutboxFailure[], rest: readonly string[]): Promise<void> {
    const { lease } = claim;
    try {
      if (confirmed.length > 0) {
        const removed = await this.store.complete(lease, confirmed);
        if (this.observer) {
          const done = new Set(confirmed);
          const ids = claim.records.filter((r) => done.has(r.sequence)).map((r) => r.id);
          this.emit({ type: 'completed', fencingToken: lease.fencingToken, ids, removed });
        }
        if (removed < confirmed.length) {
          this.logger.warn({ relay: this.options.name, fencingToken: lease.fencingToken, confirmed: confirmed.length, removed }, 'outbox relay: some published messages were taken over by another relay before they were removed; it publishes them again (same ids)');
        }
      }
      if (failures.length > 0) await this.store.fail(lease, failures);
      if (rest.length > 0) await this.store.release(lease, rest);
    } catch (error) {
      this.logger.error({ relay: this.options.name, err: error, fencingToken: lease.fencingToken }, 'outbox relay: settling a claim failed; its messages stay leased until the lease runs out, then are published again (same ids)');
    }
  }

  private emit(event: OutboxRelayEvent): void {
    if (!this.observer) return;
    try {
      this.observer.onEvent(event);
    } catch (error) {
      this.logger.warn({ relay: this.options.name, err: error, event: event.type }, 'outbox relay: the observer threw; ignored');
    }
  }

  private publish(record: OutboxRecord): Promise<void> {
    const publisher = this.publisherOf(record);
    if (!this.tracer) return publisher.publish(record);
    return this.tracer.tracePublish(record, (traced) => publisher.publish(traced));
  }

  private publisherOf(record: OutboxRecord): OutboxPublisher {
    // The claim asked only for the systems of these publishers.
    return this.publishers.get(record.system)!;
  }

  private failureOf(record: OutboxRecord, error: unknown): OutboxFailure {
    const cls = this.classify(record, error);
    const attempt = record.attempts + 1;
    const dead = cls.permanent || attempt >= this.options.maxAttempts;
    const retryInMs = dead ? undefined : backoffDelay(this.options.retryBackoff, attempt);
    const message = truncateErrorMessage(error) ?? 'unknown error';
    const fields = { relay: this.options.name, id: record.id, system: record.system, destination: record.destination, orderingKey: record.orderingKey, attempt, reason: cls.reason, err: error };
    if (dead) this.logger.error({ ...fields, permanent: cls.permanent }, `outbox message is dead after ${attempt} attempt${attempt === 1 ? '' : 's'} (${cls.reason}); requeue it with twophase outbox requeue`);
    else this.logger.warn({ ...fields, retryInMs }, 'outbox publish failed; will retry');
    return { sequence: record.sequence, reason: cls.reason, error: message, retryInMs };
  }

  private classify(record: OutboxRecord, error: unknown): PublishFailureClass {
    const fromPublisher = this.publisherOf(record).classify?.(error);
    if (fromPublisher) return fromPublisher;
    if (error instanceof TwophaseError) return { reason: error.code.toLowerCase(), permanent: !error.retriable };
    return { reason: 'publish_failed', permanent: false };
  }

  /** `claimConcurrency` lanes, each claiming, publishing and settling one claim after another. */
  private async loop(): Promise<void> {
    let failing = false;
    const lane = async (): Promise<void> => {
      while (!this.stopRequested) {
        let cycle: RelayCycle;
        try {
          cycle = await this.relayOnce();
          if (failing) this.logger.warn({ relay: this.options.name }, 'outbox relay: the store answers again');
          failing = false;
          this.refreshStatsAfterPoll();
        } catch (error) {
          if (!failing) this.logger.warn({ relay: this.options.name, err: error }, `outbox relay: claiming failed; retrying every ${this.options.storeRetryDelayMs} ms`);
          failing = true;
          await this.idle(this.options.storeRetryDelayMs);
          continue;
        }
        // A full batch: more is likely waiting. Otherwise wait for a notification or the poll.
        if (cycle.claimed < this.options.batchSize || cycle.published === 0) await this.idle(this.options.pollIntervalMs);
      }
    };
    await Promise.all(Array.from({ length: this.options.claimConcurrency }, lane));
  }

  /** Waits `ms` or until a notification (or stop) arrives; returns at once if one came while no lane waited. */
  private idle(ms: number): Promise<void> {
    if (this.woken || this.stopRequested) {
      this.woken = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiters.add(done);
    });
  }

  /** Wakes one waiting lane (a lane that then claims a full batch wakes the next), or marks the wake-up for the next lane to idle. */
  private wakeUp(): void {
    const [first] = this.waiters;
    if (first) first();
    else this.woken = true;
  }

  private async listen(): Promise<void> {
    if (!this.notifier) return;
    try {
      this.subscription = await this.notifier.listen(
        () => {
          // A notification (or the notifier's wake-up after it listens again) proves the subscription live.
          this.listening = true;
          this.statsChanged = true;
          this.wakeUp();
        },
        (error) => {
          this.listening = false;
          this.logger.warn({ relay: this.options.name, err: error }, `outbox relay: notifications lost; polling every ${this.options.pollIntervalMs} ms until they are back`);
        },
      );
      this.listening = true;
    } catch (error) {
      this.logger.warn({ relay: this.options.name, err: error }, `outbox relay: cannot listen for notifications; polling every ${this.options.pollIntervalMs} ms`);
    }
  }

  /**
   * After a poll: reads the counts again when they may be out of date (messages were pending at the
   * last read, which another relay or a retry delay running out may have changed, or this relay
   * claimed rows or was notified since) and the last read started at least `pollIntervalMs` ago,
   * and at least ten times the last read's duration ago: the counts scan the table, and a large
   * backlog must not be scanned back to back (the store's load from these reads stays near a
   * tenth of one connection's time). A table with only dead messages is not read at every poll.
   */
  private refreshStatsAfterPoll(): void {
    if (this.options.statsIntervalMs === 0 || this.statsReading || this.stopRequested) return;
    if (!this.statsChanged && !((this.lastStats?.pending ?? 0) > 0)) return;
    const spacingMs = Math.max(this.options.pollIntervalMs, STATS_READ_SPACING * this.statsReadMs);
    if (performance.now() - this.statsReadStartedAt < spacingMs) return;
    void this.refreshStats();
  }

  /** Reads the store's counts into `health().stats`; a read in progress is shared. Never rejects. */
  private refreshStats(): Promise<void> {
    this.statsReading ??= this.readStats().finally(() => (this.statsReading = undefined));
    return this.statsReading;
  }

  private async readStats(): Promise<void> {
    // A change after this point is not seen by this read: it marks the counts out of date again.
    this.statsChanged = false;
    const started = performance.now();
    this.statsReadStartedAt = started;
    try {
      this.lastStats = await this.store.stats();
    } catch (error) {
      this.logger.warn({ relay: this.options.name, err: error }, 'outbox relay: reading the outbox counts failed');
    } finally {
      this.statsReadMs = performance.now() - started;
    }
  }

  private async giveBack(current: CurrentClaim, why: string): Promise<void> {
    if (current.settled) return;
    current.settled = true;
    this.current.delete(current);
    const sequences = [...current.held];
    // The leases are given back: stop extending them (the publishes still in flight are abandoned).
    current.held.clear();
    await current.keeper?.stop();
    this.logger.warn({ relay: this.options.name, messages: sequences.length, fencingToken: current.claim.lease.fencingToken }, `outbox relay: ${why}; giving the leases of unconfirmed messages back`);
    try {
      await this.store.release(current.claim.lease, sequences);
    } catch (error) {
      this.logger.error({ relay: this.options.name, err: error }, 'outbox relay: giving leases back failed; they run out after leaseMs');
    }
  }

  private async closePublishers(): Promise<void> {
    for (const p of this.publishers.values()) {
      try {
        await p.close?.();
      } catch (error) {
        this.logger.warn({ relay: this.options.name, err: error, system: p.system }, 'outbox relay: closing a publisher failed');
      }
    }
  }
}

/** Reads of the counts after polls start no sooner than this many times the last read's duration after it. */
const STATS_READ_SPACING = 10;

/** A claim being published: its rows still held, whether it was settled (or given back). */
interface CurrentClaim {
  readonly claim: OutboxClaim;
  readonly held: Set<string>;
  settled: boolean;
  readonly keeper: LeaseExtender;
}

/** Rows grouped by (system, ordering key) in staging order; rows without a key each alone. */
function byOrderingKey(records: readonly OutboxRecord[]): Iterable<OutboxRecord[]> {
  const runs = new Map<string, OutboxRecord[]>();
  const single: OutboxRecord[][] = [];
  for (const r of records) {
    if (r.orderingKey === null) {
      single.push([r]);
      continue;
    }
    const k = `${r.system}\u0000${r.orderingKey}`;
    const run = runs.get(k);
    if (run) run.push(r);
    else runs.set(k, [r]);
  }
  return [...runs.values(), ...single];
}

/** Extends a claim's lease every `extendIntervalMs` while it is published; drops rows the store no longer holds for it. */
class LeaseExtender {
  private readonly timer: NodeJS.Timeout;
  private running: Promise<void> | undefined;

  constructor(
    private readonly store: OutboxStore,
    private readonly claim: OutboxClaim,
    private readonly held: Set<string>,
    private readonly options: ResolvedOutboxRelayOptions,
    private readonly logger: Logger,
    private readonly onLost: (sequences: readonly string[]) => void,
  ) {
    this.timer = setInterval(() => {
      this.running ??= this.extend().finally(() => (this.running = undefined));
    }, options.extendIntervalMs);
    // The relay's loop keeps the process alive while it runs; an abandoned claim's timer must not.
    this.timer.unref();
  }

  private async extend(): Promise<void> {
    const asked = [...this.held];
    if (asked.length === 0) return;
    try {
      const still = new Set(await this.store.extend(this.claim.lease, asked, this.options.leaseMs));
      const lost = asked.filter((s) => !still.has(s));
      for (const s of lost) this.held.delete(s);
      if (lost.length > 0) {
        this.onLost(lost);
        this.logger.warn({ relay: this.options.name, fencingToken: this.claim.lease.fencingToken, lost: lost.length }, 'outbox relay: lease lost (taken over by another relay); not publishing those messages');
      }
    } catch (error) {
      this.logger.warn({ relay: this.options.name, err: error }, 'outbox relay: extending the lease failed; trying again');
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    if (this.running) await this.running;
  }
}

/** True when `promise` did not settle within `ms`. */
async function raceTimeout(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(true), ms);
  });
  try {
    return await Promise.race([promise.then(() => false, () => false), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
