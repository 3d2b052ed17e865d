/**
 * Runs the payments consumer against local Kafka and Redis until SIGINT/SIGTERM. Creates the
 * topic and its dead-letter topic first when they are missing.
 *
 *   npx ts-node --transpile-only examples/kafka-redis/main.ts
 *
 * See README.md beside this file.
 */
import { Kafka, logLevel } from 'kafkajs';
import { ensureTopics } from './topics';
import { configFromEnv, startKafkaPaymentsService } from './service';

async function main(): Promise<void> {
  const config = configFromEnv();
  const created = await ensureTopics(new Kafka({ clientId: 'payments-topics', brokers: [...config.kafkaBrokers], logLevel: logLevel.ERROR }), config.topic, config.partitions);
  if (created.length > 0) process.stdout.write(`created ${created.join(', ')} (${config.partitions} partitions)\n`);
  const service = await startKafkaPaymentsService(config);
  process.stdout.write(`consuming "${config.topic}" as group "${config.groupId}" (dead letters to ${config.topic}.dlq); Ctrl-C to stop\n`);
  const report = setInterval(() => {
    const s = service.stats();
    const health = service.consumer.health();
    process.stdout.write(`[stats] ready=${health.ready} inFlight=${health.inFlight} records=${s.records} settled=${s.settled} requeued-in-place=${s.requeuedInPlace} dead-lettered=${s.deadLettered} commits=${s.commits} group-joins=${s.groupJoins}\n`);
  }, 5000);
  report.unref();
  let stopping = false;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      process.stdout.write(`${signal}: stopping (in-flight payments finish, offsets are committed)\n`);
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
