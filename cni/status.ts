/**
 * STATUS against the IPAM daemon: can an ADD be served now? Unreachable → code 50
 * ("plugin not available"); no address now and no way to get one → code 51.
 *
 * @module
 */
import { CniError, ErrorCode } from "./errors.ts";
import type { IpamClient } from "./ipam_client.ts";

/** Throws code 50 or 51 unless the daemon can serve an ADD now. */
export async function checkStatus(client: IpamClient): Promise<void> {
  let status;
  try {
    status = await client.status({ op: "status" });
  } catch (e) {
    if (e instanceof CniError && (e.code === 50 || e.code === 51)) throw e;
    const err = e as CniError;
    throw new CniError(
      ErrorCode.PLUGIN_NOT_AVAILABLE,
      `plugin not available: ${err.message}`,
      err.details,
    );
  }
  if (status.available === 0 && !status.canGrow) {
    throw new CniError(
      ErrorCode.PLUGIN_NOT_AVAILABLE_LIMITED,
      `no IPs available: pool ${status.pool} has no free address and cannot grow`,
      "every ENI and secondary-IP slot is used, or the subnets are full",
    );
  }
}
