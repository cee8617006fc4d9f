/**
 * Kubernetes label-selector syntax for subnet and security-group tags:
 * `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a)`, `k` (exists), `!k` (absent),
 * joined by commas (all must hold).
 *
 * @module
 */

/** One requirement of a selector. */
export type Requirement =
  | { key: string; op: "in"; values: string[] }
  | { key: string; op: "notin"; values: string[] }
  | { key: string; op: "exists" }
  | { key: string; op: "absent" };

/** A parsed selector: every requirement must match. */
export interface TagSelector {
  /** The source text, kept for logs and introspection. */
  text: string;
  requirements: Requirement[];
}

/** A selector that could not be parsed; `column` is 1-based. */
export class SelectorSyntaxError extends Error {
  /** Where in the text the problem is (1-based). */
  readonly column: number;
  /** Builds the error with the offending column. */
  constructor(message: string, text: string, column: number) {
    super(`${message} at column ${column} of selector "${text}"`);
    this.name = "SelectorSyntaxError";
    this.column = column;
  }
}

// Tag keys on AWS may hold letters, digits, spaces and + - = . _ : / @; in selector text we
// accept everything except the operators and separators, which keeps `aws:cloudformation:x`.
const KEY_CHAR = /[A-Za-z0-9_.\-:/@+]/;
const VALUE_CHAR = /[A-Za-z0-9_.\-:/@+]/;

/** Parses a label selector; throws {@linkcode SelectorSyntaxError} naming the column. */
export function parseSelector(text: string): TagSelector {
  let pos = 0;
  const fail = (msg: string): never => {
    throw new SelectorSyntaxError(msg, text, pos + 1);
  };
  const skipWs = () => {
    while (pos < text.length && text[pos] === " ") pos++;
  };
  const word = (chars: RegExp, what: string): string => {
    skipWs();
    const start = pos;
    while (pos < text.length && chars.test(text[pos])) pos++;
    if (pos === start) {
      fail(pos < text.length ? `expected ${what}, found "${text[pos]}"` : `expected ${what}`);
    }
    return text.slice(start, pos);
  };
  const valueList = (): string[] => {
    skipWs();
    if (text[pos] !== "(") fail(`expected "(" to open a value list`);
    pos++;
    const values: string[] = [];
    for (;;) {
      values.push(word(VALUE_CHAR, "a value"));
      skipWs();
      if (text[pos] === ",") {
        pos++;
        continue;
      }
      if (text[pos] === ")") {
        pos++;
        return values;
      }
      fail(`expected "," or ")" in a value list`);
    }
  };

  const requirements: Requirement[] = [];
  skipWs();
  if (pos === text.length) fail("empty selector");
  while (pos < text.length) {
    skipWs();
    if (text[pos] === "!") {
      pos++;
      requirements.push({ key: word(KEY_CHAR, 'a tag key after "!"'), op: "absent" });
    } else {
      const key = word(KEY_CHAR, "a tag key");
      skipWs();
      if (text.startsWith("==", pos) || text[pos] === "=") {
        pos += text.startsWith("==", pos) ? 2 : 1;
        requirements.push({ key, op: "in", values: [word(VALUE_CHAR, 'a value after "="')] });
      } else if (text.startsWith("!=", pos)) {
        pos += 2;
        requirements.push({
          key,
          op: "notin",
          values: [word(VALUE_CHAR, 'a value after "!="')],
        });
      } else if (/^in[ (]/.test(text.slice(pos))) {
        pos += 2;
        requirements.push({ key, op: "in", values: valueList() });
      } else if (/^notin[ (]/.test(text.slice(pos))) {
        pos += 5;
        requirements.push({ key, op: "notin", values: valueList() });
      } else if (pos === text.length || text[pos] === ",") {
        requirements.push({ key, op: "exists" });
      } else {
        fail(`expected "=", "!=", "in", "notin", "," or the end after key "${key}"`);
      }
    }
    skipWs();
    if (pos === text.length) break;
    if (text[pos] !== ",") fail(`expected "," between requirements`);
    pos++;
    skipWs();
    if (pos === text.length) fail("trailing comma");
  }
  return { text, requirements };
}

/** Whether a tag set satisfies every requirement of the selector. */
export function matchesTags(sel: TagSelector, tags: Record<string, string>): boolean {
  return sel.requirements.every((r) => {
    const has = Object.hasOwn(tags, r.key);
    switch (r.op) {
      case "exists":
        return has;
      case "absent":
        return !has;
      case "in":
        return has && r.values.includes(tags[r.key]);
      case "notin":
        // Kubernetes: `notin` matches objects without the key as well.
        return !has || !r.values.includes(tags[r.key]);
    }
  });
}
