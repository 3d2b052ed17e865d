/**
 * The consumer's and runOnce's two wired parts, `claimer` and `source`: a missing or wrong one is
 * refused with what was given and the fix. A store client given where its claimer belongs (an
 * ioredis client, a pg Pool) or a broker client where its source belongs (a kafkajs client, an
 * amqplib connection) is recognised by its shape (nothing is imported) and named.
 */
import { ConfigurationError } from './errors';
import { describeType } from './known-options';

type Fn = (...args: never[]) => unknown;
const has = (value: object, ...methods: string[]): boolean => methods.every((m) => typeof (value as Record<string, unknown>)[m] === 'function');

/** What a value that is not the part looks like, and where it goes instead. */
interface Misplaced {
  readonly got: string;
  readonly fix: string;
}

const CLAIMER_EXAMPLES = "new InMemoryClaimer() (twophase), new RedisClaimer({ redis }) (twophase/redis) or new PostgresClaimer({ pool }, { mode: 'transactional' }) (twophase/postgres)";
const SOURCE_EXAMPLES = 'new RabbitMqSource({ url, queue }) (twophase/rabbitmq), new KafkaSource({ kafka }, { topics, groupId }) (twophase/kafka) or new MemorySource({ broker, queue }) (twophase/memory)';

function misplacedClaimer(value: object): Misplaced | undefined {
  if (has(value, 'sendCommand', 'defineCommand')) return { got: 'an ioredis client', fix: "an ioredis client goes inside a claimer: new RedisClaimer({ redis }) from 'twophase/redis'" };
  if (has(value, 'query', 'connect')) return { got: 'a pg Pool or Client', fix: "a pg Pool goes inside a claimer: new PostgresClaimer({ pool }, { mode: 'transactional' }) from 'twophase/postgres'" };
  return undefined;
}

function misplacedSource(value: unknown): Misplaced | undefined {
  if (typeof value === 'string' && /^amqps?:\/\//.test(value)) {
    return { got: describeType(value), fix: "a RabbitMQ URL goes inside a source: new RabbitMqSource({ url, queue }) from 'twophase/rabbitmq'" };
  }
  if (typeof value !== 'object' || value === null) return undefined;
  if (has(value, 'consumer', 'producer', 'admin')) return { got: 'a kafkajs client', fix: "a kafkajs client goes inside a source: new KafkaSource({ kafka }, { topics, groupId }) from 'twophase/kafka'" };
  if (has(value, 'subscribe', 'run', 'commitOffsets')) {
    return { got: 'a kafkajs consumer', fix: "KafkaSource makes its own consumer from the kafkajs client: new KafkaSource({ kafka }, { topics, groupId }) from 'twophase/kafka'" };
  }
  if (has(value, 'createChannel', 'createConfirmChannel') || has(value, 'assertQueue', 'consume')) {
    return { got: 'an amqplib connection or channel', fix: "RabbitMqSource opens its own connection from a URL: new RabbitMqSource({ url, queue }) from 'twophase/rabbitmq'" };
  }
  return undefined;
}

/** `a Redis`, or `an object with no claim()` for a plain object. */
function describeObject(value: object, method: string): string {
  const proto: unknown = Object.getPrototypeOf(value);
  const name = proto === null || proto === Object.prototype ? '' : ((proto as { constructor?: Fn }).constructor?.name ?? '');
  return name && name !== 'Object' ? `a ${name} (no ${method}())` : `an object with no ${method}()`;
}

function refuse(prefix: string, role: string, type: string, method: string, examples: string, value: unknown, misplaced: Misplaced | undefined): never {
  if (value === undefined || value === null) throw new ConfigurationError(`${prefix}${role} is required: a ${type} such as ${examples}`);
  const got = misplaced?.got ?? (typeof value === 'object' ? describeObject(value, method) : describeType(value));
  const fix = misplaced?.fix ?? `give a ${type}, such as ${examples}`;
  throw new ConfigurationError(`${prefix}${role} must be a ${type} (an object with ${method}()), got ${got}: ${fix}`);
}

/**
 * @param prefix put before the message (`'runOnce: '`), or `''`
 * @throws ConfigurationError naming what was given and the fix, when `value` has no `claim()`
 */
export function checkClaimer(prefix: string, value: unknown): void {
  if (typeof value === 'object' && value !== null && has(value, 'claim')) return;
  refuse(prefix, 'claimer', 'Claimer', 'claim', CLAIMER_EXAMPLES, value, typeof value === 'object' && value !== null ? misplacedClaimer(value) : undefined);
}

/** @throws ConfigurationError naming what was given and the fix, when `value` has no `start()` */
export function checkSource(value: unknown): void {
  if (typeof value === 'object' && value !== null && has(value, 'start')) return;
  refuse('', 'source', 'MessageSource', 'start', SOURCE_EXAMPLES, value, misplacedSource(value));
}
