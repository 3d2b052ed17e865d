/** The versions of `ioredis` twophase supports: its `peerDependencies` range in package.json. */
export const SUPPORTED_RANGE = '^5.9.2 || ^6.0.0';
