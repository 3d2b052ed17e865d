/**
 * Runs the payments consumer against local RabbitMQ and Redis until SIGINT/SIGTERM.
 *
 *   npx ts-node --transpile-only examples/rabbitmq-redis/main.ts
 *
 * See README.md beside this file.
 */
import { configFromEnv, startPaymentsService } from './service';

async function main(): Promise<void> {
  const config = configFromEnv();
  const service = await startPaymentsService(config);
  process.stdout.write(`consuming "${config.queue}" (exchange "${config.exchange}", routing key payment.requested) with prefetch ${config.concurrency}; Ctrl-C to stop\n`);
  const report = setInterval(() => {
    const s = service.stats();
    const health = service.consumer.health();
    process.stdout.write(
      `[stats] ready=${health.ready} inFlight=${health.inFlight} delivered=${s.deliveries} acked=${s.acks} requeued=${JSON.stringify(s.requeues)} dead-lettered=${s.rejects} stale-settles=${s.staleSettlesSkipped} reconnects=${s.reconnects}\n`,
    );
  }, 5000);
  report.unref();
  let stopping = false;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      process.stdout.write(`${signal}: stopping (in-flight payments finish first)\n`);
      clearInterval(report);
      service.stop().then(
        () => process.stdout.write('stopped\n'),
        (error: unknown) => {
          process.stderr.write(`stop failed: ${String(error)}\n`);
          process.exitCode = 1;
        },
      );
    });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`payments consumer failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1); // not exitCode: a client opened before the failure would keep the process alive
});
