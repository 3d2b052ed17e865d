/**
 * The `twophase` CLI as a library (for embedding and tests). The command itself is `bin.ts`.
 *
 * @module twophase/cli
 */
export { runCli, EXIT, AMQP_URL_ENV, type CliContext } from './program';
export { replayDeadLetters, type ReplayOptions, type ReplayEvent, type ReplayOutcome, type ReplaySummary } from './replay';
export { type ReplayBackend, type ReplayBackendFactory, type ReplayItem, type ReplayDestination, ReplayItemError, type ReplayNotice, type ReplayOpenContext } from './replay-backend';
export { REPLAY_BACKENDS } from './backends';
export { RabbitMqReplayBackend, type RabbitMqReplayOptions, type RabbitItem, DEFAULT_AMQP_URL } from './backends/rabbitmq';
export { type CliIo, humanReporter, jsonReporter } from './reporters';
export { MissingPeerError } from './peer';
