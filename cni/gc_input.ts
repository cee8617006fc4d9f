/**
 * GC's one required input: `cni.dev/valid-attachments`, the attachments the runtime still
 * holds. Without it a GC would read as "none is valid" and release every live pod of the
 * network, so its absence is a malformed request.
 *
 * @module
 */
import type { ValidAttachment } from "./config.ts";
import { CniError, ErrorCode } from "./errors.ts";

/** Returns the valid attachments, or throws code 7 naming the missing field. */
export function requireValidAttachments(
  valid: ValidAttachment[] | undefined,
): ValidAttachment[] {
  if (valid === undefined) {
    throw new CniError(
      ErrorCode.INVALID_CONFIG,
      "invalid network configuration: GC needs cni.dev/valid-attachments",
      "a GC without the list of valid attachments would release every pod of the network, " +
        "so nothing was released; send the attachments the runtime still holds " +
        '(an empty list "[]" means none is valid)',
    );
  }
  return valid;
}
