/**
 * Types of the Powertools subpath `./cache`. The repository compiles with
 * `moduleResolution: node`, which ignores package `exports`, so the subpath's types are mapped to
 * the file the package's `exports` points at (the runtime import uses the subpath).
 */
declare module '@aws-lambda-powertools/idempotency/cache' {
  export { CachePersistenceLayer } from '@aws-lambda-powertools/idempotency/lib/cjs/persistence/CachePersistenceLayer';
}
