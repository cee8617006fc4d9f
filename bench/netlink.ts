/**
 * Entry for the netlink benchmark (see bench/netlink/veth_bench.ts).
 *
 * @module
 */
export { benchNetlink, type NetlinkBenchResult } from "./netlink/veth_bench.ts";
