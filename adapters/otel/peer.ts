/**
 * Loaded first by the entry point: fails it with an error naming the package when the optional
 * peer dependency `@opentelemetry/api` is not installed.
 */
import { requirePeer } from '../../src/adapter-kit';

requirePeer('@opentelemetry/api', 'twophase/otel');

/** The versions of `@opentelemetry/api` twophase supports: its `peerDependencies` range in package.json. */
export const SUPPORTED_RANGE = '^1.9.0';
