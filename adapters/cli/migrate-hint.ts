/**
 * The `twophase postgres migrate` hint of a schema error, made runnable as printed for the command
 * that failed: the outbox commands and `keys … --store postgres` give the same `--schema` and
 * `--url` to the migration they name.
 */
import { TwophaseError } from '../../src';

/** The flags of the failed command the hint repeats. */
export interface MigrateHintFlags {
  /** `--url` as given (not from the environment: the same environment gives it to migrate). */
  readonly url?: string;
  /** `--schema` as given; undefined when the command ran on the default schema without the flag. */
  readonly schema?: string;
}

/**
 * `error`'s message with its `twophase postgres migrate` hint made runnable as printed for this
 * command: `--url` when the command was given one (without its password: a note says so), and
 * `--schema` when it was given one. Other errors pass unchanged.
 */
export function withMigrateCommand(error: unknown, flags: MigrateHintFlags): unknown {
  if (!(error instanceof TwophaseError) || error.code !== 'SCHEMA_MISMATCH') return error;
  const hint = /`twophase postgres migrate[^`]*`/;
  if (!hint.test(error.message)) return error;
  const words = ['twophase', 'postgres', 'migrate'];
  let note = '';
  if (flags.url !== undefined) {
    const { url, hadPassword } = withoutPassword(flags.url);
    words.push('--url', shellWord(url));
    if (hadPassword) note = ' (the password is left out: add it to the URL, or set PGPASSWORD)';
  }
  if (flags.schema !== undefined) words.push('--schema', shellWord(flags.schema));
  return error.message.replace(hint, () => `\`${words.join(' ')}\`${note}`);
}

/** `url` with its password removed, and whether it had one. */
function withoutPassword(url: string): { url: string; hadPassword: boolean } {
  try {
    const parsed = new URL(url);
    if (parsed.password === '') return { url, hadPassword: false };
    parsed.password = '';
    return { url: parsed.toString(), hadPassword: true };
  } catch {
    return { url, hadPassword: false };
  }
}

/** `word` as one POSIX shell word: as is when it holds only safe characters, else single-quoted. */
function shellWord(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}
