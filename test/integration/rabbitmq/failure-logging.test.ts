/**
 * Issue #12 item 6 on the real services (RabbitMQ + Redis): 1,000 keyless messages from a foreign
 * producer (plain amqplib, no idempotency-key, no message id) are all dead-lettered as
 * `missing_key`; the logger shows a few lines with the reason and the destination and one summary
 * with the count, not a line per message; `health()` counts them. A handler that throws is logged
 * as a retry, then a dead-letter.
 */
import { ack } from '../../../src';
import { describeWithServices } from '../../support/services';
import { Harness } from './support/harness';
import { waitFor } from '../../support/wait';

describeWithServices(['rabbitmq', 'redis'], 'failure logging and dead-letter counts (RabbitMQ + Redis)', () => {
  let h: Harness;
  beforeEach(() => {
    h = new Harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('1,000 keyless messages: all dead-lettered as missing_key, a few lines plus a summary, counted in health()', async () => {
    const queue = h.queue('keyless');
    const consumer = h.consumer({ source: h.source({ queue }), claimer: h.claimer('redis'), concurrency: 50 }, async () => {
      throw new Error('never called');
    });
    await consumer.start();
    const ch = await h.admin.ch();
    for (let i = 0; i < 1000; i++) ch.sendToQueue(queue, Buffer.from(JSON.stringify({ i })));
    await ch.waitForConfirms();
    await waitFor(() => consumer.health().deadLetters.missing_key === 1000, { what: '1,000 missing_key dead-letters' });
    await waitFor(async () => (await h.admin.messageCount(`${queue}.dlq`)) === 1000, { what: '1,000 messages in the DLQ' });
    await consumer.stop();
    const failureLines = h.logger.lines.filter((l) => (l.level === 'warn' || l.level === 'error'));
    const perMessage = failureLines.filter((l) => (l.obj as { reason?: string }).reason === 'missing_key');
    expect(perMessage.length).toBeGreaterThan(0);
    expect(perMessage[0]!.obj).toMatchObject({ consumer: 'test', reason: 'missing_key', destination: 'dead-letter' });
    const summaries = failureLines.filter((l) => (l.obj as { suppressed?: object }).suppressed !== undefined);
    const suppressed = summaries.reduce((n, l) => n + ((l.obj as { suppressed: Record<string, number> }).suppressed.missing_key ?? 0), 0);
    expect(perMessage.length + suppressed).toBe(1000);
    expect(failureLines.length).toBeLessThanOrEqual(20);
  });

  it('a handler that throws: a retry line, then a retry_exhausted dead-letter at error level', async () => {
    const queue = h.queue('throws');
    const consumer = h.consumer({ source: h.source({ queue }), claimer: h.claimer('redis'), maxAttempts: 2 }, async () => {
      throw new Error('ledger down');
    });
    await consumer.start();
    await h.admin.publish('', queue, { n: 1 }, { headers: { 'idempotency-key': 'k-throws' } });
    await waitFor(() => consumer.health().deadLetters.retry_exhausted === 1, { what: 'the retry_exhausted dead-letter' });
    const retry = h.logger.lines.find((l) => (l.obj as { reason?: string }).reason === 'handler_error');
    expect(retry).toMatchObject({ level: 'warn', obj: { key: 'test:k-throws', destination: 'requeue', attempt: 1, maxAttempts: 2 } });
    const dead = h.logger.lines.find((l) => (l.obj as { reason?: string }).reason === 'retry_exhausted');
    expect(dead).toMatchObject({ level: 'error', obj: { key: 'test:k-throws', destination: 'dead-letter', attempt: 2 } });
    expect(((dead!.obj as { err: Error }).err).message).toBe('ledger down');
  });

  it('a retry line carries the delay the message waits (the delay tier it took), not the backoff asked', async () => {
    const queue = h.queue('tier-delay');
    let runs = 0;
    const consumer = h.consumer(
      // 1669 ms asked: the test tiers are 100, 500 and 2000 ms, and 2000 is the nearest on a log scale.
      { source: h.source({ queue }), claimer: h.claimer('redis'), maxAttempts: 3, retryBackoff: { initialDelayMs: 1669, maxDelayMs: 1669, jitter: 0 } },
      async () => {
        runs += 1;
        if (runs === 1) throw new Error('ledger down once');
        return ack();
      },
    );
    await consumer.start();
    await h.admin.publish('', queue, { n: 1 }, { headers: { 'idempotency-key': 'k-tier' } });
    const retry = await waitFor(() => h.logger.lines.find((l) => (l.obj as { reason?: string }).reason === 'handler_error'), { what: 'the retry line' });
    expect(retry.obj).toMatchObject({ key: 'test:k-tier', destination: 'requeue', delayMs: 2000 });
    await waitFor(() => runs === 2, { what: 'the second run, after the tier' });
  });
});

