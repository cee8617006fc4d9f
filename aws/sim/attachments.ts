/**
 * Attaching and detaching ENIs: EC2's checks (same AZ, free device index, the instance
 * type's ENI and address limits) and the "attaching"/"detaching" phases that last
 * `attachDelayMs` before the change completes.
 *
 * @module
 */
import { invalidValueThrow, SimError } from "./errors.ts";
import { type AttachmentState, randomHex } from "./model.ts";
import type { SimState } from "./state.ts";

/** AttachNetworkInterface; returns the attachment. `immediate` skips `attachDelayMs` (seeding). */
export function attachNetworkInterface(
  state: SimState,
  eniId: string,
  instanceId: string,
  deviceIndex: number,
  networkCardIndex = 0,
  immediate = false,
): AttachmentState {
  const eni = state.eni(eniId);
  const inst = state.instance(instanceId);
  if (eni.attachment) {
    throw new SimError("InvalidNetworkInterface.InUse", `Interface: [${eniId}] in use.`);
  }
  if (eni.az !== inst.az) {
    throw new SimError(
      "InvalidParameterCombination",
      `You may not attach a network interface to an instance if they are not in the same availability zone`,
    );
  }
  const card = inst.limits.networkCards.find(([i]) => i === networkCardIndex);
  if (!card) {
    invalidValueThrow(
      `Network card index '${networkCardIndex}' is not valid for ${inst.limits.type}`,
    );
  }
  const attached = state.enisOf(instanceId);
  if (
    attached.some((e) =>
      e.attachment!.deviceIndex === deviceIndex &&
      e.attachment!.networkCardIndex === networkCardIndex
    )
  ) {
    invalidValueThrow(
      `Instance '${instanceId}' already has an interface attached at device index '${deviceIndex}'.`,
    );
  }
  const onCard = attached.filter((e) => e.attachment!.networkCardIndex === networkCardIndex).length;
  if (attached.length + 1 > inst.limits.maxEnis || onCard + 1 > card![1]) {
    throw new SimError(
      "AttachmentLimitExceeded",
      `Interface count ${attached.length + 1} exceeds the limit for ${inst.limits.type}`,
    );
  }
  if (eni.privateIps.length + eni.prefixes.length > inst.limits.ipv4PerEni) {
    throw new SimError(
      "PrivateIpAddressLimitExceeded",
      `Number of private addresses on ${eniId} exceeds the limit for ${inst.limits.type}`,
    );
  }
  const delay = immediate ? 0 : state.faults.attachDelayMs;
  const att: AttachmentState = {
    id: `eni-attach-${randomHex(17)}`,
    instanceId,
    deviceIndex,
    networkCardIndex,
    status: delay > 0 ? "attaching" : "attached",
    attachTime: new Date(),
    attachedAt: delay > 0 ? undefined : Date.now(),
    deleteOnTermination: false,
  };
  eni.attachment = att;
  state.emit({ kind: "attach", eniId });
  const complete = () => {
    if (eni.attachment !== att) return;
    att.status = "attached";
    att.attachedAt = Date.now();
    state.emit({ kind: "attached", eniId });
  };
  if (delay > 0) state.schedule(delay, complete);
  else state.emit({ kind: "attached", eniId });
  return att;
}

/** DetachNetworkInterface by attachment id. */
export function detachNetworkInterface(
  state: SimState,
  attachmentId: string,
  _force = false,
): void {
  const eni = [...state.enis.values()].find((e) => e.attachment?.id === attachmentId);
  if (!eni) {
    throw new SimError(
      "InvalidAttachmentID.NotFound",
      `The attachment ID '${attachmentId}' does not exist`,
    );
  }
  const att = eni.attachment!;
  if (att.deviceIndex === 0) {
    throw new SimError(
      "OperationNotPermitted",
      `The network interface at device index 0 cannot be detached.`,
    );
  }
  if (att.status === "detaching") return;
  const delay = state.faults.attachDelayMs;
  att.status = "detaching";
  state.emit({ kind: "detach", eniId: eni.id });
  const complete = () => {
    if (eni.attachment !== att) return;
    eni.attachment = undefined;
    state.emit({ kind: "detached", eniId: eni.id });
  };
  if (delay > 0) state.schedule(delay, complete);
  else complete();
}
