/**
 * Which Kafka client the chaos harness's Kafka processes consume with (`run.ts --client`): kafkajs
 * (the default), @platformatic/kafka with the classic group protocol, or @platformatic/kafka with
 * KIP-848 (`groupProtocol: 'consumer'`). The harness's own producer, admin and dead-letter reader
 * stay on kafkajs: they observe the run, they are not under test.
 *
 * @platformatic/kafka needs Node >= 22.22: run the harness on Node 24 (scripts/ci/chaos-platformatic.sh does).
 */
import type { KafkaSourceDependencies } from '../../adapters/kafka';

export const CHAOS_KAFKA_CLIENTS = ['kafkajs', 'platformatic', 'platformatic-kip848'] as const;

/** A client the chaos harness can run its Kafka consumers on. */
export type ChaosKafkaClient = (typeof CHAOS_KAFKA_CLIENTS)[number];

/** A KafkaSource's dependencies for the named client on the given brokers (logs off): `{ kafka }` for kafkajs, as users pass it. */
export async function chaosSourceDependencies(name: ChaosKafkaClient, clientId: string, brokers: readonly string[]): Promise<KafkaSourceDependencies> {
  if (name === 'kafkajs') {
    const { Kafka, logLevel } = await import('kafkajs');
    return { kafka: new Kafka({ clientId, brokers: [...brokers], logLevel: logLevel.NOTHING }) };
  }
  const { platformaticClient } = await import('../../adapters/kafka');
  return { client: platformaticClient({ clientId, bootstrapBrokers: brokers }, { groupProtocol: name === 'platformatic-kip848' ? 'consumer' : 'classic' }) };
}
