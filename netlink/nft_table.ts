/**
 * nf_tables tables of the ip family: create, delete, list. A table is the unit of
 * ownership: everything vpcni programs lives in a table of its own, so it never touches
 * rules other software owns.
 *
 * @module
 */
import { getString, type NetlinkMessage, NLM_F_CREATE } from "./codec.ts";
import type { BatchRequest, NetlinkSocket } from "./socket.ts";
import { getBe32, NFT_MSG, nftAttrs, nftDumpRequest, nftMessage } from "./nft_batch.ts";
import { InvalidInputError } from "./errors.ts";

const NFTA_TABLE_NAME = 1;
const NFTA_TABLE_FLAGS = 2;
const NFTA_TABLE_USE = 3;
const NFTA_TABLE_USERDATA = 6;

/** NFT_NAME_MAXLEN less the NUL: the longest table, chain, set name the kernel takes. */
export const NFT_NAME_MAX = 255;

/** A table as the kernel lists it. */
export interface NftTable {
  name: string;
  /** Chains, sets and objects that reference it. */
  use: number;
  flags: number;
  /** What its creator stored with it (vpcni: a text that says what made it). */
  userdata?: Uint8Array;
}

/** Checks an nf_tables object name (table, chain, set). */
export function checkNftName(name: string, what: string): string {
  if (typeof name !== "string" || name.length === 0 || name.length > NFT_NAME_MAX) {
    throw new InvalidInputError(`${what}: a name of 1–${NFT_NAME_MAX} characters is required`);
  }
  return name;
}

/** A transaction step that creates table `name` (or leaves an existing one as it is). */
export function newTableRequest(name: string, userdata?: Uint8Array): BatchRequest {
  const b = nftMessage(NFT_MSG.NEWTABLE, NLM_F_CREATE)
    .attrString(NFTA_TABLE_NAME, checkNftName(name, "table"));
  if (userdata) b.attr(NFTA_TABLE_USERDATA, userdata);
  return { message: b, subject: `table ip ${name}` };
}

/** A transaction step that deletes table `name` with everything in it. */
export function deleteTableRequest(name: string): BatchRequest {
  const b = nftMessage(NFT_MSG.DELTABLE, 0).attrString(
    NFTA_TABLE_NAME,
    checkNftName(name, "table"),
  );
  return { message: b, subject: `table ip ${name}` };
}

/** Decodes one NFT_MSG_NEWTABLE message. */
export function parseTable(m: NetlinkMessage): NftTable | undefined {
  const { msg, attrs } = nftAttrs(m);
  if (msg !== NFT_MSG.NEWTABLE || m.data[0] !== 2) return undefined;
  const name = attrs.get(NFTA_TABLE_NAME);
  if (!name) return undefined;
  const ud = attrs.get(NFTA_TABLE_USERDATA);
  return {
    name: getString(name),
    use: attrs.has(NFTA_TABLE_USE) ? getBe32(attrs.get(NFTA_TABLE_USE)!) : 0,
    flags: attrs.has(NFTA_TABLE_FLAGS) ? getBe32(attrs.get(NFTA_TABLE_FLAGS)!) : 0,
    userdata: ud ? ud.slice() : undefined,
  };
}

/** The ip-family tables in the socket's netns. */
export function listTables(s: NetlinkSocket): NftTable[] {
  return s.dump(nftDumpRequest(NFT_MSG.GETTABLE), parseTable);
}
