/**
 * The tag keys the daemon puts on every ENI it creates. The leak collector and `doctor`
 * recognise vpcni's ENIs by them, so both read them from here.
 *
 * @module
 */

/** The cluster the ENI belongs to (the daemon's `clusterName`). */
export const TAG_CLUSTER = "vpcni.io/cluster";
/** The instance the ENI was created for. */
export const TAG_INSTANCE = "vpcni.io/instance-id";
/** When the ENI was created (ISO time). */
export const TAG_CREATED = "vpcni.io/created-at";
/** The pool the ENI serves. */
export const TAG_POOL = "vpcni.io/pool";
