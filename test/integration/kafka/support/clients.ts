/**
 * The Kafka clients every parametrised suite runs on: one row per client (and group protocol),
 * each building a {@link KafkaClient} for the same broker. A suite takes the table and runs one
 * code path per row.
 *
 * @platformatic/kafka needs Node >= 22.22 (or >= 24.6). On an older Node its rows are skipped
 * with the reason printed, unless `CI` is set: then they fail, except in the CI step that runs
 * them on Node 24 afterwards (scripts/ci/platformatic-kafka.sh), which the Node 20 step announces
 * with `TWOPHASE_PLATFORMATIC_ON_NODE24=1`.
 */
import { kafkajsClient, type KafkaClient } from '../../../../adapters/kafka';
import { nodeSupportsPlatformatic, platformaticClient, PLATFORMATIC_NODE_RANGE } from '../../../../adapters/kafka/platformatic-client';
import { describeWithServices, type ServiceName } from '../../../support/services';
import { BROKERS, makeKafka } from './kafka-helpers';

export interface ClientRow {
  /** Label in test names. */
  readonly name: 'kafkajs' | 'platformatic-classic' | 'platformatic-kip848';
  /** Builds a client for the test broker. */
  readonly make: (clientId: string) => KafkaClient;
  /** Why this row cannot run here, if it cannot. */
  readonly unavailable?: string;
}

const platformaticUnavailable = nodeSupportsPlatformatic(process.version)
  ? undefined
  : `@platformatic/kafka needs Node ${PLATFORMATIC_NODE_RANGE}, this is ${process.version} (run: bash scripts/ci/platformatic-kafka.sh)`;

/** Every client row. */
export const clients: readonly ClientRow[] = [
  { name: 'kafkajs', make: (clientId) => kafkajsClient(makeKafka(clientId)) },
  {
    name: 'platformatic-classic',
    make: (clientId) => platformaticClient({ clientId, bootstrapBrokers: BROKERS, retries: 5, retryDelay: 100 }),
    unavailable: platformaticUnavailable,
  },
  {
    name: 'platformatic-kip848',
    make: (clientId) => platformaticClient({ clientId, bootstrapBrokers: BROKERS, retries: 5, retryDelay: 100 }, { groupProtocol: 'consumer' }),
    unavailable: platformaticUnavailable,
  },
];

/** Only the rows named. */
export function clientRows(...names: ReadonlyArray<ClientRow['name']>): readonly ClientRow[] {
  return clients.filter((row) => names.includes(row.name));
}

/**
 * `describeWithServices` once per row, the row's name appended to `title`. A row that cannot run
 * on this Node is skipped with its reason (outside CI), or fails the run (under CI).
 */
export function describeEachClient(services: ServiceName[], title: string, rows: readonly ClientRow[], fn: (row: ClientRow) => void): void {
  for (const row of rows) {
    const name = `${title} [${row.name}]`;
    if (!row.unavailable) {
      describeWithServices(services, name, () => fn(row));
      continue;
    }
    if (process.env.CI && process.env.TWOPHASE_PLATFORMATIC_ON_NODE24 !== '1') {
      describe(name, () => {
        test('runs on this Node', () => {
          throw new Error(`required under CI: ${row.unavailable}`);
        });
      });
      continue;
    }
    console.warn(`SKIPPED "${name}": ${row.unavailable}`);
    // jest still runs a skipped describe's body to collect its tests: hand it a client that is never used.
    const reason = row.unavailable;
    const unusable = (): never => {
      throw new Error(reason);
    };
    describe.skip(`${name} [skipped: ${reason}]`, () => fn({ ...row, make: () => ({ consumer: unusable, producer: unusable, admin: unusable }) }));
  }
}
