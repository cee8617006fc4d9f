/**
 * Names doctor prints come from outside (pod names, namespaces, container ids, annotations,
 * pool names, files): a terminal must not take any of them for a command. Control characters
 * are shown as visible escapes instead of being written raw.
 *
 * @module
 */

/** C0 and C1 controls, DEL, and the bidirectional overrides that reorder what is shown. */
// deno-lint-ignore no-control-regex -- matching controls is the point
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/** Short escapes for the common controls; the rest are `\xHH` or `\uHHHH`. */
const SHORT: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };

/**
 * `text` with every control character written as an escape a reader sees:
 * ESC → `\x1b`, BEL → `\x07`, newline → `\n`, carriage return → `\r`, U+202E → `\u202e`.
 */
export function visible(text: string): string {
  return text.replace(UNPRINTABLE, (c) => {
    if (SHORT[c]) return SHORT[c];
    const code = c.charCodeAt(0);
    return code <= 0xff
      ? `\\x${code.toString(16).padStart(2, "0")}`
      : `\\u${code.toString(16).padStart(4, "0")}`;
  });
}

/** Characters JSON.stringify leaves raw that a terminal may still act on (DEL, C1, bidi). */
const RAW_IN_JSON = /[\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/**
 * `JSON.stringify` for terminal output: the C0 controls it escapes already, and DEL, the C1
 * controls and the bidirectional overrides as `\uHHHH` too. The result parses to the same value.
 */
export function jsonText(value: unknown, indent = 2): string {
  return JSON.stringify(value, null, indent).replace(
    RAW_IN_JSON,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}
