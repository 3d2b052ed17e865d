/**
 * Loaded first by the entry point: fails it with an error naming the package when the optional
 * peer dependency `kafkajs` is not installed.
 */
import { requirePeer } from '../../src/adapter-kit';

requirePeer('kafkajs', 'twophase/kafka');

/** The versions of `kafkajs` twophase supports: its `peerDependencies` range in package.json. */
export const SUPPORTED_RANGE = '^2.2.4';
