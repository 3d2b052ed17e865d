/**
 * The S18 consumer (lease TTL shorter than the handler), shared by its in-process and RabbitMQ
 * suites: each handler run is recorded, then works `workMs` (3 s by default; a fake-timer suite
 * advances the clock) before it acks.
 */
import { ack, ConsumerBase, type Disposition, type HandlerContext, type Message } from '../../../src';
import { sleep } from '../../../src/adapter-kit';

/** One handler run: which consumer, its fencing token, and when it started and ended (ms). */
export interface Run {
  readonly consumer: number;
  readonly fencingToken: number;
  readonly startedAt: number;
  endedAt?: number;
}

export class SlowConsumer extends ConsumerBase<unknown> {
  constructor(
    options: ConstructorParameters<typeof ConsumerBase>[0],
    private readonly id: number,
    private readonly runs: Run[],
    private readonly workMs = 3000,
  ) {
    super(options);
  }

  async handle(_message: Message<unknown>, context: HandlerContext): Promise<Disposition> {
    const run: Run = { consumer: this.id, fencingToken: context.fencingToken, startedAt: Date.now() };
    this.runs.push(run);
    await sleep(this.workMs);
    run.endedAt = Date.now();
    return ack();
  }
}
