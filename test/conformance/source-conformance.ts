/**
 * The message source conformance suite: one jest suite that proves the broker side of the
 * settlement contract against any {@link MessageSource}. Call
 * `describeSourceConformance(name, factory)` from a test file.
 *
 * The suite drives the source directly through a {@link RecordingSink} (no ConsumerBase): each
 * test decides how a delivery settles, then checks what the broker did with it. The sink takes
 * deliveries through `submit` (the path the consumer gives every source), claims keys for
 * `claimBatch` in a real InMemoryClaimer, and lets a test report a delivery's `handled` moment
 * before it settles, so an in-order source's pipelined path runs here too.
 * The factory returns a harness over one fresh queue or topic: a way to make sources on it (a
 * second one plays the consumer that comes after a crash or a restart), to publish, to read the
 * dead letters, and to crash a source without settling.
 */
import { type Delivery, type DeliveryResult, InMemoryClaimer, type MessageSource, type RejectInfo } from '../../src';
import type { DeliverySink, PreparedClaim, Submission } from '../../src/adapter-kit';
import { waitFor } from '../support/wait';

/** A dead letter as the harness reads it back from the broker. */
export interface ReadDeadLetter {
  readonly body: string;
  /** The reason the source recorded (its `twophase-reason` header, or the in-process reason). */
  readonly reason: string;
}

export interface SourceHarness {
  /** A new source on the harness's queue or topic; sources of one harness share it (one group). */
  createSource(): MessageSource;
  /** Publishes one message with `body` (UTF-8) to the queue or topic. */
  publish(body: string): Promise<void>;
  /** Every dead letter written so far for the queue or topic. */
  deadLetters(): Promise<ReadDeadLetter[]>;
  /** Drops `source` as a dying process would: nothing settled, no graceful close. */
  crash(source: MessageSource): Promise<void>;
  /** A requeue delay the source honours (a delay tier of the RabbitMQ source), ms. */
  readonly requeueDelayMs: number;
  /** True when the broker flags a delivery made again after a crash as `redelivered`. */
  readonly flagsRedelivery: boolean;
  /** How long a delivery may take to arrive (group joins, fetch waits), ms. */
  readonly deliveryTimeoutMs: number;
  cleanup(): Promise<void>;
}

export type SourceFactory = () => Promise<SourceHarness>;

/** One delivery as the sink got it: when, and how to end its dispatch. */
export interface Received {
  readonly delivery: Delivery;
  readonly body: string;
  /** `Date.now()` at arrival. */
  readonly at: number;
  /** The claim `claimBatch` made ahead for it, if the source passed one. */
  readonly preclaimed: PreparedClaim | undefined;
  /** Reports its `handled` moment: the source may go on while it is not settled yet. */
  handle(): void;
  /** Ends the dispatch (the pipeline is done with the delivery; settled or not). */
  end(): void;
}

const RESULT: DeliveryResult = { action: 'ack', outcome: 'committed', handled: true, durationMs: 0 };
const REJECT_INFO: RejectInfo = { reason: 'handler_rejected', attempts: 1, errorMessage: 'conformance reject', errorType: 'Error' };

/**
 * The consumer side, reduced to a recorder: every delivery is kept with a way to report its
 * `handled` moment and to end its dispatch; `claimBatch` claims each delivery's message id in an
 * InMemoryClaimer. The test settles through `delivery.settler`.
 */
export class RecordingSink implements DeliverySink {
  readonly received: Received[] = [];
  /** Deliveries claimed through claimBatch, and the batches. */
  claimedAhead = 0;
  claimBatches = 0;
  private readonly claimer = new InMemoryClaimer();

  submit(delivery: Delivery, preclaimed?: PreparedClaim): Submission {
    let early!: (handled: boolean) => void;
    const handled = new Promise<boolean>((resolve) => (early = resolve));
    const settled = new Promise<DeliveryResult>((resolve) => {
      const end = (): void => {
        early(false); // ignored once `handle()` resolved it true
        resolve(RESULT);
      };
      this.received.push({ delivery, body: delivery.body.toString('utf8'), at: Date.now(), preclaimed, handle: () => early(true), end });
    });
    return { handled, settled };
  }

  dispatch(delivery: Delivery, preclaimed?: PreparedClaim): Promise<DeliveryResult> {
    return this.submit(delivery, preclaimed).settled;
  }

  async claimBatch(deliveries: readonly Delivery[]): Promise<PreparedClaim[]> {
    this.claimBatches++;
    const claims: PreparedClaim[] = [];
    for (const delivery of deliveries) {
      const key = `conformance:${String(delivery.messageId)}:${this.claimedAhead++}`;
      claims.push({ kind: 'claimed', key, result: await this.claimer.claim(key, { leaseTtlMs: 60_000, doneTtlMs: 120_000 }) });
    }
    return claims;
  }

  /** Deliveries of `body`, in arrival order. */
  of(body: string): Received[] {
    return this.received.filter((r) => r.body === body);
  }

  /** Ends every dispatch still open (the pipeline gave up on them). */
  endAll(): void {
    for (const r of this.received) r.end();
  }
}

export function describeSourceConformance(name: string, factory: SourceFactory): void {
  describe(`source conformance: ${name}`, () => {
    let h: SourceHarness;
    const running: Array<{ source: MessageSource; sink: RecordingSink; stopped: boolean }> = [];
    let n = 0;
    const body = (label: string) => `conf-${label}-${++n}-${Date.now().toString(36)}`;

    beforeEach(async () => {
      h = await factory();
    });
    afterEach(async () => {
      for (const r of running.splice(0)) {
        r.sink.endAll();
        if (!r.stopped) await r.source.stopIntake().catch(() => undefined);
        await r.source.close().catch(() => undefined);
      }
      await h.cleanup();
    });

    async function started(): Promise<{ source: MessageSource; sink: RecordingSink; stop: () => Promise<void> }> {
      const source = h.createSource();
      const sink = new RecordingSink();
      const entry = { source, sink, stopped: false };
      running.push(entry);
      await source.start(sink, { concurrency: 10 });
      const stop = async () => {
        entry.stopped = true;
        sink.endAll();
        await source.stopIntake();
        await source.close();
      };
      return { source, sink, stop };
    }

    const arrival = (sink: RecordingSink, b: string, count = 1, what = `delivery ${count} of ${b}`) =>
      waitFor(() => sink.of(b)[count - 1], { what, timeoutMs: h.deliveryTimeoutMs });

    test('delivers a published message with its body, destination and system', async () => {
      const { source, sink } = await started();
      const b = body('deliver');
      await h.publish(b);
      const got = await arrival(sink, b);
      expect(got.delivery.body.toString('utf8')).toBe(b);
      expect(got.delivery.metadata.system).toBe(source.system);
      expect(got.delivery.metadata.destination).toEqual(expect.any(String));
      expect(got.delivery.metadata.redelivered).toBe(false);
    });

    test('ack: the message is done; a later consumer of the queue never gets it again', async () => {
      const first = await started();
      const acked = body('acked');
      await h.publish(acked);
      const got = await arrival(first.sink, acked);
      await got.delivery.settler.ack({ duplicate: false });
      got.end();
      await first.stop();
      const second = await started();
      const marker = body('marker');
      await h.publish(marker);
      await arrival(second.sink, marker);
      expect(second.sink.of(acked)).toEqual([]);
      expect(await h.deadLetters()).toEqual([]);
    });

    test('requeue with a delay: the message comes back after about that delay, not before', async () => {
      const { sink } = await started();
      const b = body('requeue');
      await h.publish(b);
      const got = await arrival(sink, b);
      const requeuedAt = Date.now();
      await got.delivery.settler.requeue(h.requeueDelayMs, { cause: 'retry', attempt: 1 });
      got.end();
      const again = await arrival(sink, b, 2);
      // Timers may fire a little early relative to Date.now(); allow 10 %.
      expect(again.at - requeuedAt).toBeGreaterThanOrEqual(h.requeueDelayMs * 0.9);
      await again.delivery.settler.ack({ duplicate: false });
      again.end();
      expect(await h.deadLetters()).toEqual([]);
    });

    test('reject: the message goes to the dead-letter destination with its reason, and is not delivered again', async () => {
      const { sink } = await started();
      const b = body('reject');
      await h.publish(b);
      const got = await arrival(sink, b);
      await got.delivery.settler.reject(REJECT_INFO);
      got.end();
      const dead = await waitFor(async () => (await h.deadLetters()).find((d) => d.body === b), { what: `the dead letter of ${b}`, timeoutMs: h.deliveryTimeoutMs });
      expect(dead.reason).toBe('handler_rejected');
      // A marker published after the reject arrives; the rejected message does not come back.
      const marker = body('marker');
      await h.publish(marker);
      await arrival(sink, marker);
      expect(sink.of(b)).toHaveLength(1);
    });

    test('crash: a delivery left unsettled by a consumer that died is delivered to the next one', async () => {
      const first = await started();
      const b = body('crash');
      await h.publish(b);
      await arrival(first.sink, b);
      await h.crash(first.source);
      first.sink.endAll();
      const second = await started();
      const again = await arrival(second.sink, b);
      if (h.flagsRedelivery) expect(again.delivery.metadata.redelivered).toBe(true);
      await again.delivery.settler.ack({ duplicate: false });
      again.end();
    });

    test('crash: a settle made after the crash has no effect (the message still comes back)', async () => {
      const first = await started();
      const b = body('stale');
      await h.publish(b);
      const got = await arrival(first.sink, b);
      await h.crash(first.source);
      // The old delivery may report the stale settle (a rejection) or ignore it; it must not act.
      await got.delivery.settler.ack({ duplicate: false }).catch(() => undefined);
      first.sink.endAll();
      const second = await started();
      await arrival(second.sink, b);
    });

    test('settle-once: a second settle of a delivery is ignored (no dead letter, no redelivery)', async () => {
      const { sink } = await started();
      const b = body('once');
      await h.publish(b);
      const got = await arrival(sink, b);
      await got.delivery.settler.ack({ duplicate: false });
      // Only the first call reaches the broker; the repeats resolve and change nothing.
      await expect(got.delivery.settler.reject(REJECT_INFO)).resolves.toBeUndefined();
      await expect(got.delivery.settler.requeue(0, { cause: 'retry', attempt: 1 })).resolves.toBeUndefined();
      await expect(got.delivery.settler.ack({ duplicate: true })).resolves.toBeUndefined();
      got.end();
      // A requeue that wrongly went through would be back in the queue by now, ahead of a marker
      // published after it: the marker's arrival bounds the wait (the queue is FIFO; Kafka's
      // single partition keeps order and requeues in place).
      await new Promise((resolve) => setTimeout(resolve, h.requeueDelayMs * 2));
      const marker = body('marker');
      await h.publish(marker);
      await arrival(sink, marker);
      expect(sink.of(b)).toHaveLength(1);
      expect((await h.deadLetters()).filter((d) => d.body === b)).toEqual([]);
    });

    test('handled before settled: the source goes on to the next message, and the first one\'s later ack still counts', async () => {
      const first = await started();
      const a = body('handled-a');
      const b = body('handled-b');
      await h.publish(a);
      const gotA = await arrival(first.sink, a);
      await h.publish(b);
      // An in-order source (one Kafka partition) dispatches b only after a's handled moment.
      gotA.handle();
      const gotB = await arrival(first.sink, b);
      await gotA.delivery.settler.ack({ duplicate: false });
      gotA.end();
      await gotB.delivery.settler.ack({ duplicate: false });
      gotB.end();
      await first.stop();
      const second = await started();
      const marker = body('marker');
      await h.publish(marker);
      await arrival(second.sink, marker);
      expect(second.sink.of(a)).toEqual([]);
      expect(second.sink.of(b)).toEqual([]);
    });

    test('claim ahead: a source that claims ahead passes each delivery the claim claimBatch made for it', async () => {
      const { source, sink } = await started();
      const bodies = [body('ahead-1'), body('ahead-2'), body('ahead-3')];
      for (const b of bodies) await h.publish(b);
      for (const b of bodies) {
        const got = await arrival(sink, b);
        await got.delivery.settler.ack({ duplicate: false });
        got.end();
      }
      const passed = bodies.map((b) => sink.of(b)[0]!.preclaimed);
      if (source.claimsAhead === true) {
        expect(sink.claimBatches).toBeGreaterThan(0);
        for (const claim of passed) expect(claim).toMatchObject({ kind: 'claimed', result: { state: 'acquired' } });
      } else {
        expect(passed.every((claim) => claim === undefined || claim.kind === 'skipped')).toBe(true);
      }
    });

    test('stopIntake: the delivery in flight can still be acked; a message published after it goes to the next consumer only', async () => {
      const first = await started();
      const a = body('stop-a');
      await h.publish(a);
      const gotA = await arrival(first.sink, a);
      await first.source.stopIntake();
      const b = body('stop-b');
      await h.publish(b);
      await gotA.delivery.settler.ack({ duplicate: false });
      gotA.end();
      await first.stop();
      const second = await started();
      const gotB = await arrival(second.sink, b);
      await gotB.delivery.settler.ack({ duplicate: false });
      gotB.end();
      // first is closed: what it got is final.
      expect(first.sink.of(b)).toEqual([]);
      expect(second.sink.of(a)).toEqual([]);
    });

    test('close with a delivery never settled: it is delivered again to the next consumer; close() may be repeated', async () => {
      const first = await started();
      const a = body('close');
      await h.publish(a);
      await arrival(first.sink, a);
      await first.stop(); // ends the dispatch unsettled, stops intake, closes
      await expect(first.source.close()).resolves.toBeUndefined();
      const second = await started();
      const again = await arrival(second.sink, a);
      await again.delivery.settler.ack({ duplicate: false });
      again.end();
    });
  });
}
