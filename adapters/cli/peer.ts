/**
 * Loading an optional peer dependency (amqplib, kafkajs, ioredis, pg) from a CLI command.
 *
 * twophase declares the broker and store clients as optional peers: a RabbitMQ + Redis service
 * installs no kafkajs and no pg. The CLI therefore loads a client library (and the adapter code
 * that uses it) only inside the command that needs it, and turns a missing one into a
 * {@link MissingPeerError} naming the package and the command, instead of a stack trace.
 */
import { MissingPeerDependencyError } from '../../src';
import type { CliIo } from './reporters';

/** A command needs an optional peer dependency that is not installed. The CLI exits with code 2. */
export class MissingPeerError extends Error {
  /** The npm package to install, for example `kafkajs`. */
  readonly peer: string;
  /** The command that needs it, for example `twophase dlq replay --broker kafka`. */
  readonly command: string;
  constructor(peer: string, command: string, options?: { cause?: unknown }) {
    super(
      `${command} needs the package "${peer}", which is not installed (twophase declares it as an optional peer dependency). ` +
        `Install it in your project: npm install ${peer}`,
      options,
    );
    this.name = 'MissingPeerError';
    this.peer = peer;
    this.command = command;
  }
}

/**
 * The module name in Node's "Cannot find module 'x'" error (`code` MODULE_NOT_FOUND), or
 * undefined for any other error. A file path names a missing file of an installed package.
 */
export function missingModuleName(error: unknown): string | undefined {
  if (!(error instanceof Error) || (error as NodeJS.ErrnoException).code !== 'MODULE_NOT_FOUND') return undefined;
  return /^Cannot find module '([^']+)'/.exec(error.message)?.[1];
}

/** True when `name` is the package `peer` or a file inside it (`pg`, `pg/lib/client`). */
function isPackage(name: string, peer: string): boolean {
  return name === peer || name.startsWith(`${peer}/`);
}

/**
 * Runs `load` (a dynamic `import()` of a CLI module that uses `peer`, or of `peer` itself).
 * @param peer the npm package `load` needs, for example `pg`
 * @param command the command, as shown to the user, for example `twophase postgres migrate`
 * @throws MissingPeerError when `peer` cannot be resolved
 * @throws whatever `load` throws otherwise (a missing module other than `peer` is not hidden)
 */
export async function importPeer<T>(peer: string, command: string, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (error) {
    const missing = missingModuleName(error);
    if (missing !== undefined && isPackage(missing, peer)) throw new MissingPeerError(peer, command, { cause: error });
    // An adapter's entry point names another missing client of the same command (amqp-connection-manager).
    if (error instanceof MissingPeerDependencyError) throw new MissingPeerError(error.peer, command, { cause: error });
    throw error;
  }
}

/**
 * Loads a peer for a command: resolves undefined after printing a {@link MissingPeerError}
 * (`error: …` on stderr) and setting exit code 2.
 * @throws anything else `load` throws
 */
export async function loadOrReport<T>(io: CliIo, setExit: (code: number) => void, load: () => Promise<T>): Promise<T | undefined> {
  try {
    return await load();
  } catch (error) {
    if (!(error instanceof MissingPeerError)) throw error;
    io.stderr(`error: ${error.message}\n`);
    setExit(2);
    return undefined;
  }
}
