/**
 * Loaded first by the entry point: fails it with an error naming the packages when neither Kafka
 * client twophase binds (`kafkajs`, `@platformatic/kafka`; both optional peer dependencies) is
 * installed. One of them is enough: a project on @platformatic/kafka installs no kafkajs.
 */
import { requirePeer } from '../../src/adapter-kit';

try {
  requirePeer('kafkajs', 'twophase/kafka');
} catch (kafkajsMissing) {
  try {
    requirePeer('@platformatic/kafka', 'twophase/kafka');
  } catch {
    throw kafkajsMissing;
  }
}

/** The versions of `kafkajs` twophase supports: its `peerDependencies` range in package.json. */
export const SUPPORTED_RANGE = '^2.2.4';
