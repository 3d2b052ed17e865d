/**
 * Loaded first by the entry point: fails it with an error naming the package when the optional
 * peer dependencies `amqplib` and `amqp-connection-manager` (reconnects) are not installed.
 */
import { requirePeer } from '../../src/adapter-kit';

requirePeer(['amqplib', 'amqp-connection-manager'], 'twophase/rabbitmq');

/** The versions of `amqplib` twophase supports: its `peerDependencies` range in package.json. */
export const SUPPORTED_RANGE = '^2.3.1';
