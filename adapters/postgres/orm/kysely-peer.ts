/**
 * Loaded first by `twophase/kysely`: fails it with an error naming the package when the optional
 * peer dependency `kysely` is not installed.
 */
import { requirePeer } from '../../../src/adapter-kit';

requirePeer('kysely', 'twophase/kysely');

/** The versions of `kysely` twophase supports: its `peerDependencies` range in package.json. */
export const SUPPORTED_RANGE = '^0.29.9';
