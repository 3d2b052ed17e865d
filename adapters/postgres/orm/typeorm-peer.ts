/**
 * Loaded first by `twophase/typeorm`: fails it with an error naming the package when the optional
 * peer dependency `typeorm` is not installed.
 */
import { requirePeer } from '../../../src/adapter-kit';

requirePeer('typeorm', 'twophase/typeorm');

/** The versions of `typeorm` twophase supports: its `peerDependencies` range in package.json. */
export const SUPPORTED_RANGE = '^1.1.1';
