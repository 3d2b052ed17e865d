/**
 * The Kafka broker version in bench/kafka's JSON report is read from the broker process (its
 * class path and server.properties), not written as a constant.
 */
import { listenerPorts, versionFromCommandLine } from '../../bench/kafka/broker-version';

describe('Kafka broker version of the benchmark report', () => {
  test('read from the Kafka jar on the broker\'s class path (4.x and 3.x layouts)', () => {
    const v4 = 'java -Xmx1g -cp /root/.m2/repository/org/apache/kafka/kafka_2.13/4.4.0/kafka_2.13-4.4.0.jar:/root/.m2/repository/org/apache/kafka/kafka-clients/4.4.0/kafka-clients-4.4.0.jar kafka.Kafka /work/main/.kafka/server.properties';
    expect(versionFromCommandLine(v4)).toBe('4.4.0');
    expect(versionFromCommandLine('java -cp /opt/kafka/libs/kafka-clients-3.9.2.jar:/opt/kafka/libs/kafka_2.13-3.9.2.jar kafka.Kafka config/server.properties')).toBe('3.9.2');
    expect(versionFromCommandLine('java -cp /x/kafka-server-4.1.0.jar:/x/kafka-clients-4.1.0.jar kafka.Kafka s.properties')).toBe('4.1.0');
    expect(versionFromCommandLine('java -cp /x/kafka-clients-4.1.0.jar kafka.Kafka s.properties')).toBeUndefined();
  });

  test('the broker is matched to the bench by the ports its server.properties listens on', () => {
    expect(listenerPorts('process.roles=broker,controller\nlisteners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\nadvertised.listeners=PLAINTEXT://127.0.0.1:9092\n')).toEqual([9092, 9093]);
    expect(listenerPorts('listeners = PLAINTEXT://:19092\n')).toEqual([19092]);
    expect(listenerPorts('broker.id=1\n')).toEqual([]);
  });
});
