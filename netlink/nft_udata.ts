/**
 * The user data nft keeps with a table or rule: type-length-value records, of which type 0
 * is the comment (a NUL-terminated text of at most 128 bytes). vpcni writes its comments
 * in that form so `nft list ruleset` shows them.
 *
 * @module
 */
import { InvalidInputError } from "./errors.ts";
import { concatBytes } from "../base/bytes.ts";

/** NLM_F_APPEND: NEWRULE adds the rule at the end of its chain. */
export const NLM_F_APPEND_RULE = 0x800;

const COMMENT = 0;
const COMMENT_MAX = 128;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A comment as user data (a table's and a rule's comment records are alike). */
export function ruleCommentBytes(text: string): Uint8Array {
  const t = encoder.encode(text);
  if (t.length + 1 > COMMENT_MAX) {
    throw new InvalidInputError(`nft comment longer than ${COMMENT_MAX - 1} bytes: "${text}"`);
  }
  // type, length, then the text with its NUL
  return concatBytes([new Uint8Array([COMMENT, t.length + 1]), t, new Uint8Array(1)]);
}

/** The comment in user data, if it holds one. */
export function parseComment(ud: Uint8Array): string | undefined {
  let off = 0;
  while (off + 2 <= ud.length) {
    const type = ud[off];
    const len = ud[off + 1];
    if (off + 2 + len > ud.length) return undefined;
    if (type === COMMENT) {
      const v = ud.subarray(off + 2, off + 2 + len);
      const nul = v.indexOf(0);
      return decoder.decode(nul >= 0 ? v.subarray(0, nul) : v);
    }
    off += 2 + len;
  }
  return undefined;
}
