/**
 * The KafkaSource's own dead-letter producer prints no kafkajs "switched default partitioner"
 * warning: an application that creates no producer should not read about partitioners.
 */
import { Kafka, logLevel } from 'kafkajs';
import { kafkajsClient } from '../../adapters/kafka/kafkajs-client';

test('the producer twophase creates through kafkajs logs no partitioner warning', () => {
  const lines: string[] = [];
  const kafka = new Kafka({ brokers: ['127.0.0.1:1'], logLevel: logLevel.INFO, logCreator: () => ({ log }) => void lines.push(String(log.message)) });
  kafkajsClient(kafka).producer({ allowAutoTopicCreation: false });
  expect(lines.filter((l) => /partitioner/i.test(l))).toEqual([]);
  // The control: kafkajs warns for a producer created without a partitioner.
  kafka.producer();
  expect(lines.some((l) => /partitioner/i.test(l))).toBe(true);
});
