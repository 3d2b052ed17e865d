/**
 * Loaded first by `twophase/prisma`: fails it with an error naming the package when the optional
 * peer dependency `@prisma/client` is not installed.
 */
import { requirePeer } from '../../../src/adapter-kit';

requirePeer('@prisma/client', 'twophase/prisma');

/** The versions of `@prisma/client` twophase supports: its `peerDependencies` range in package.json. */
export const SUPPORTED_RANGE = '^7.10.0';
