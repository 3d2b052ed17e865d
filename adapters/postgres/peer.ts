/**
 * Loaded first by the entry point: fails it with an error naming the package when the optional
 * peer dependency `pg` is not installed.
 */
import { requirePeer } from '../../src/adapter-kit';

requirePeer('pg', 'twophase/postgres');

/** The versions of `pg` twophase supports: its `peerDependencies` range in package.json. */
export const SUPPORTED_RANGE = '^8.16.3';
