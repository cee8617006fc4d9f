/**
 * rtnetlink over Deno FFI: links, addresses, routes, rules, neighbours, netns and sysctls.
 * Every call is synchronous and runs on the JS thread; nothing here shells out.
 *
 * @module
 */

export * from "./errors.ts";
export * from "./socket.ts";
export * from "./netns.ts";
export * from "./netns_named.ts";
export * from "./link.ts";
export * from "./addr.ts";
export * from "./route.ts";
export * from "./rule.ts";
export * from "./neigh.ts";
export * from "./sysctl.ts";
export {
  type Family,
  formatIp,
  formatMac,
  parseCidr,
  type ParsedCidr,
  type ParsedIp,
  parseIp,
  parseMac,
} from "./ip.ts";
export { MessageBuilder, type NetlinkMessage, RTM } from "./codec.ts";
export { type ScopeName } from "./scope.ts";
