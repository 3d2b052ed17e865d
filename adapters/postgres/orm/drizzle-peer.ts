/**
 * Loaded first by `twophase/drizzle`: fails it with an error naming the package when the optional
 * peer dependency `drizzle-orm` (or `pg`, its node-postgres driver) is not installed.
 */
import { requirePeer } from '../../../src/adapter-kit';

requirePeer(['drizzle-orm', 'pg'], 'twophase/drizzle');

/** The versions of `drizzle-orm` twophase supports: its `peerDependencies` range in package.json. */
export const SUPPORTED_RANGE = '^0.45.0';
