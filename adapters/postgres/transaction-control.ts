/**
 * Finds transaction-control statements in SQL text sent through a claim's transaction
 * (`ctx.transaction`). The inbox transaction is twophase's: a handler's BEGIN, COMMIT or ROLLBACK
 * would end it (or start one that a later COMMIT ends), committing or dropping the claim row
 * outside twophase's commit. Savepoints (`SAVEPOINT`, `RELEASE`, `ROLLBACK TO`) stay allowed: they
 * nest inside the transaction without ending it.
 *
 * The text is scanned, not parsed: comments, quoted strings, quoted identifiers and dollar-quoted
 * bodies are skipped, the rest is split at `;`, and each statement's leading keywords are read
 * (https://www.postgresql.org/docs/current/sql-syntax-lexical.html).
 */

/**
 * The first statement of `sql` that ends the transaction or opens another one (`BEGIN`,
 * `START TRANSACTION`, `COMMIT`, `END`, `ROLLBACK` without `TO`, `ABORT`, `PREPARE TRANSACTION`),
 * as its leading keywords in upper case; undefined when there is none.
 */
export function transactionControl(sql: string): string | undefined {
  // Every statement this reports starts with one of these words, spelled out in the text: without
  // any of them there is nothing to find (most handler statements), so the scan is skipped.
  if (!CONTROL_WORD.test(sql)) return undefined;
  if (sql.length > SCANNED_TEXT_LIMIT) return scan(sql);
  if (scanned.has(sql)) return scanned.get(sql);
  const found = scan(sql);
  // Handlers send a few texts over and over: remember the answers for short texts, within a bound.
  if (scanned.size >= SCANNED_LIMIT) scanned.clear();
  scanned.set(sql, found);
  return found;
}

/** A word a transaction-control statement starts with, anywhere in the text (case-insensitive). */
const CONTROL_WORD = /begin|commit|end|abort|start|prepare|rollback/i;

/** Answers of {@link scan} for texts that hold a {@link CONTROL_WORD}, at most SCANNED_LIMIT texts. */
const scanned = new Map<string, string | undefined>();
const SCANNED_LIMIT = 256;
/** Longer texts (bulk statements with their values written in) are scanned each time, never kept. */
const SCANNED_TEXT_LIMIT = 2048;

function scan(sql: string): string | undefined {
  for (const statement of statements(sql)) {
    const words = statement.trim().split(/\s+/, 4).map((w) => w.toUpperCase());
    const [first, second, third] = words;
    switch (first) {
      case 'BEGIN':
      case 'COMMIT':
      case 'END':
      case 'ABORT':
        return first;
      case 'START':
        if (second === 'TRANSACTION') return 'START TRANSACTION';
        break;
      case 'PREPARE':
        if (second === 'TRANSACTION') return 'PREPARE TRANSACTION';
        break;
      case 'ROLLBACK': {
        // ROLLBACK [WORK | TRANSACTION] TO [SAVEPOINT] name stays inside the transaction.
        const next = second === 'WORK' || second === 'TRANSACTION' ? third : second;
        if (next !== 'TO') return 'ROLLBACK';
        break;
      }
      default:
        break;
    }
  }
  return undefined;
}

/** The statements of `sql`, with comments and quoted text blanked out. */
function statements(sql: string): string[] {
  const out: string[] = [];
  let current = '';
  let i = 0;
  const n = sql.length;
  while (i < n) {
    const c = sql[i]!;
    const next = sql[i + 1];
    if (c === '-' && next === '-') {
      const end = sql.indexOf('\n', i);
      i = end < 0 ? n : end + 1;
      current += ' ';
    } else if (c === '/' && next === '*') {
      // Block comments nest in PostgreSQL.
      let depth = 1;
      i += 2;
      while (i < n && depth > 0) {
        if (sql[i] === '/' && sql[i + 1] === '*') {
          depth++;
          i += 2;
        } else if (sql[i] === '*' && sql[i + 1] === '/') {
          depth--;
          i += 2;
        } else i++;
      }
      current += ' ';
    } else if (c === "'" || c === '"') {
      // '' (or "") inside doubles the quote; an E'' string may also escape with a backslash.
      const escapes = c === "'" && /[eE]$/.test(current);
      i++;
      while (i < n) {
        if (escapes && sql[i] === '\\') i += 2;
        else if (sql[i] === c && sql[i + 1] === c) i += 2;
        else if (sql[i] === c) break;
        else i++;
      }
      i++;
      current += ' x ';
    } else if (c === '$' && /^\$([A-Za-z_][A-Za-z_0-9]*)?\$/.test(sql.slice(i, i + 64)) && !/[A-Za-z_0-9]$/.test(current)) {
      const tag = /^\$([A-Za-z_][A-Za-z_0-9]*)?\$/.exec(sql.slice(i, i + 64))![0];
      const end = sql.indexOf(tag, i + tag.length);
      i = end < 0 ? n : end + tag.length;
      current += ' x ';
    } else if (c === ';') {
      out.push(current);
      current = '';
      i++;
    } else {
      current += c;
      i++;
    }
  }
  out.push(current);
  return out;
}
