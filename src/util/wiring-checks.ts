/**
 * The two wired parts of a consumer or runOnce, `claimer` and `source`: a missing or wrong one is
 * refused with what was given and the fix. A store client (an ioredis client, a pg Pool) or a
 * broker client (a kafkajs client or consumer, an amqplib connection, an AMQP URL) is recognised
 * by its shape (nothing is imported) and sent to the part it goes inside.
 */
import { ConfigurationError } from './errors';
import { describeType, instanceClassName } from './known-options';

type Role = 'claimer' | 'source';

/** A client recognised by its shape: what it is, the part it goes inside, and how. */
interface Recognised {
  readonly got: string;
  readonly belongs: Role;
  /** The part built around it. */
  readonly fix: string;
  /** The advice when it was given in place of the part it goes inside. */
  readonly advice: string;
}

const PART: Readonly<Record<Role, { readonly type: string; readonly method: string; readonly examples: string }>> = {
  claimer: {
    type: 'Claimer',
    method: 'claim',
    examples: "new InMemoryClaimer() (twophase), new RedisClaimer({ redis }) (twophase/redis) or new PostgresClaimer({ pool }, { mode: 'transactional' }) (twophase/postgres)",
  },
  source: {
    type: 'MessageSource',
    method: 'start',
    examples: 'new RabbitMqSource({ url, queue }) (twophase/rabbitmq), new KafkaSource({ kafka }, { topics, groupId }) (twophase/kafka) or new MemorySource({ broker, queue }) (twophase/memory)',
  },
};

const has = (value: object, ...methods: string[]): boolean => methods.every((m) => typeof (value as Record<string, unknown>)[m] === 'function');

function recognise(value: unknown): Recognised | undefined {
  const inside = (got: string, belongs: Role, fix: string, advice = `${got} goes inside a ${belongs}: ${fix}`): Recognised => ({ got, belongs, fix, advice });
  if (typeof value === 'string') {
    return /^amqps?:\/\//.test(value) ? { ...inside('a RabbitMQ URL', 'source', "new RabbitMqSource({ url, queue }) from 'twophase/rabbitmq'"), got: describeType(value) } : undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  if (has(value, 'sendCommand', 'defineCommand')) return inside('an ioredis client', 'claimer', "new RedisClaimer({ redis }) from 'twophase/redis'");
  if (has(value, 'query', 'connect')) return inside('a pg Pool or Client', 'claimer', "new PostgresClaimer({ pool }, { mode: 'transactional' }) from 'twophase/postgres'", `a pg Pool goes inside a claimer: new PostgresClaimer({ pool }, { mode: 'transactional' }) from 'twophase/postgres'`);
  const kafkaSource = "new KafkaSource({ kafka }, { topics, groupId }) from 'twophase/kafka'";
  if (has(value, 'consumer', 'producer', 'admin')) return inside('a kafkajs client', 'source', kafkaSource);
  if (has(value, 'subscribe', 'run', 'commitOffsets')) return inside('a kafkajs consumer', 'source', kafkaSource, `KafkaSource makes its own consumer from the kafkajs client: ${kafkaSource}`);
  if (has(value, 'createChannel', 'createConfirmChannel') || has(value, 'assertQueue', 'consume')) {
    const rabbitSource = "new RabbitMqSource({ url, queue }) from 'twophase/rabbitmq'";
    return inside('an amqplib connection or channel', 'source', rabbitSource, `RabbitMqSource opens its own connection from a URL: ${rabbitSource}`);
  }
  return undefined;
}

/** `a Widget (no claim())`, `an EventThing (no start())`, or `an object with no claim()` for a plain object. */
function describeObject(value: object, method: string): string {
  const name = instanceClassName(value);
  if (!name) return `an object with no ${method}()`;
  if (name === 'an anonymous class') return `an instance of ${name} (no ${method}())`;
  return `${/^[AEIOU]/i.test(name) ? 'an' : 'a'} ${name} (no ${method}())`;
}

function check(label: string, role: Role, value: unknown): void {
  const part = PART[role];
  if (typeof value === 'object' && value !== null && has(value, part.method)) return;
  if (value === undefined || value === null) throw new ConfigurationError(`${label} is required: a ${part.type} such as ${part.examples}`);
  const shape = `${label} must be a ${part.type} (an object with ${part.method}())`;
  const known = recognise(value);
  if (known?.belongs === role) throw new ConfigurationError(`${shape}, got ${known.got}: ${known.advice}`);
  if (known) throw new ConfigurationError(`${shape}, got ${known.got}, which goes inside a ${known.belongs} (${known.fix}), not in ${role}: give a ${part.type}, such as ${part.examples}`);
  if (typeof value === 'function') throw new ConfigurationError(`${shape}, got ${describeType(value)}`);
  const got = typeof value === 'object' ? describeObject(value, part.method) : describeType(value);
  throw new ConfigurationError(`${shape}, got ${got}: give a ${part.type}, such as ${part.examples}`);
}

/**
 * @param label how the message names the value: `claimer`, `runOnce: claimer`, `GatedClaimer dependency gate`
 * @throws ConfigurationError naming what was given and the fix, when `value` has no `claim()`
 */
export function checkClaimer(label: string, value: unknown): void {
  check(label, 'claimer', value);
}

/** @throws ConfigurationError naming what was given and the fix, when `value` has no `start()` */
export function checkSource(value: unknown): void {
  check('source', 'source', value);
}
