/**
 * Text that came from a message (keys, reasons, error texts, header values), made safe for a
 * terminal. A terminal acts on control characters instead of printing them: ESC starts sequences
 * that move the cursor, erase the screen or set the window title, CR and LF start lines, and the
 * Unicode bidirectional controls reorder what follows them. Each such character is shown as a
 * visible escape (`\x1b`, `\r`, `\n`, `\u202e`), so a message can neither forge a line nor hide
 * or reorder text in the CLI's human output. The JSON output needs none of this (JSON escapes
 * control characters, and a JSON reader does not interpret bidi controls).
 */

/**
 * C0 controls, DEL, C1 controls, the Arabic letter mark, LRM/RLM, the line and paragraph
 * separators, the bidi embeddings and overrides (U+202A–U+202E) and isolates (U+2066–U+2069).
 */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

const NAMED: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

function escapeOne(char: string): string {
  const named = NAMED[char];
  if (named !== undefined) return named;
  const code = char.charCodeAt(0);
  return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/** `text` with every control, ESC and bidi character escaped (LF too): one printable line. */
export function printable(text: string): string {
  return text.replace(UNSAFE, escapeOne);
}

/** As {@link printable}, but line feeds stay: for multi-line output the CLI composed itself. */
export function printableLines(text: string): string {
  return text
    .split('\n')
    .map((line) => printable(line))
    .join('\n');
}
