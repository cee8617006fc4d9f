/**
 * Credential redaction for `doctor bundle`: every file goes through it before it is archived,
 * the plugin's and daemon's logs included. It errs on the side of hiding: a long base64 run
 * is taken for a session token, a value after a secret-sounding key for a secret.
 *
 * @module
 */

/** Keys whose values are secrets wherever they appear in JSON. */
const SECRET_KEY = /secret|password|passwd|token|credential|session|private.?key|access.?key/i;

/** A base64 (or URL-encoded base64) character, as a regex source fragment. */
const B64 = "(?:[A-Za-z0-9/+]|%2[BbFf])";

/**
 * How STS session tokens begin (base64 of their protobuf header: "…origin_ec" for the
 * current regional tokens, "…er/aws" and "…aws" for the older global ones).
 */
const STS_PREFIX = "[A-Za-z0-9]{2}oJb3JpZ2luX2Vj|F[QwA]oGZXIvYXdz|AQoDYXdz";

/** A character of a token in any of its encodings: base64, URL-safe, percent- or JSON-escaped. */
const TOKEN_CHAR = "[A-Za-z0-9+/_=-]|%2[BbFf]|%3[Dd]|\\\\/";

/** Rules applied in order: each pattern and what replaces a match. */
const RULES: [RegExp, string | ((m: string, ...g: string[]) => string)][] = [
  // Presigned-URL parts: X-Amz-Security-Token=…, X-Amz-Credential=…, X-Amz-Signature=…
  [/\b(X-Amz-(?:Security-Token|Credential|Signature))=([^&\s"'<>\\]+)/gi, "$1=[redacted]"],
  // A password in a URL's user info: scheme://user:password@host
  [/\b([a-z][a-z0-9+.-]*:\/\/)([^/\s:@"'<>]*):([^@\s/"'<>]+)@/gi, "$1$2:[redacted]@"],
  // Authorization headers: the whole value (scheme, credential, signature) to the line's end.
  [/\b((?:proxy-)?authorization)(["']?\s*[:=]\s*["']?)([^\r\n"']+)/gi, "$1$2[redacted]"],
  // key = value and "key": "value" for secret-sounding keys (ini files, env dumps, JSON).
  [
    /\b([A-Za-z0-9_.-]*(?:secret|password|passwd|token|credential|private_?key|secret_?access_?key)[A-Za-z0-9_.-]*)(["']?\s*[:=]\s*["']?)([^\s"',;}&]+)/gi,
    "$1$2[redacted]",
  ],
  // Access key ids.
  [/\b(AKIA|ASIA|AROA|AIDA|ABIA|ACCA)[0-9A-Z]{16}\b/g, "[redacted-access-key-id]"],
  // STS session tokens by how they start, whatever their length or encoding: the protobuf
  // header they open with ("\x0a\x09origin_ec…" or "\x0a\x06er/aws…") is always the same, so
  // a truncated token, one after "%3D" or "%22", one with JSON's escaped "\/" and one in
  // URL-safe base64 are all found; so are the lines of a token wrapped at a fixed width
  // (each following line nothing but token characters).
  [
    new RegExp(
      `(?:${STS_PREFIX})(?:${TOKEN_CHAR})*(?:\\r?\\n[ \\t]*(?:${TOKEN_CHAR}){16,}$)*`,
      "gm",
    ),
    "[redacted-token]",
  ],
  // Other bare session tokens: STS tokens are base64 runs of hundreds of characters. A run
  // may start after a percent escape ("token%3D…"), not inside one.
  [
    new RegExp(`(?:(?<![A-Za-z0-9/+%])|(?<=%[0-9A-Fa-f]{2}))${B64}{100,}(?:=|%3[Dd]){0,2}`, "g"),
    "[redacted-token]",
  ],
  // Secret access keys: 40 base64 characters of mixed case and digits, standing alone.
  [
    /(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])/g,
    (m) => (/[A-Z]/.test(m) && /[a-z]/.test(m) && /\d/.test(m) ? "[redacted-40]" : m),
  ],
];

/** Replaces credentials in free text (logs, environment, configs). */
export function redactText(text: string): string {
  let out = text;
  for (const [re, to] of RULES) out = out.replace(re, to as string);
  return out;
}

/** Replaces the values of secret-looking keys in a JSON value, recursively. */
export function redactJson(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(redactJson);
  if (v && typeof v === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      out[k] = SECRET_KEY.test(k) && (typeof x === "string" || typeof x === "number")
        ? "[redacted]"
        : redactJson(x);
    }
    return out;
  }
  return typeof v === "string" ? redactText(v) : v;
}
