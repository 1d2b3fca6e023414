import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { lookup as dnsLookupAll } from "node:dns/promises";
import { BlockList, isIP, type LookupFunction } from "node:net";
import { ValidationError } from "../errors.ts";

/**
 * SSRF protection for merchant-supplied URLs (webhook endpoints, M-Pesa C2B confirmation and validation
 * URLs): the gateway must never be made to call its own loopback, the private network or a cloud
 * metadata service on a merchant's behalf. Sending goes through src/security/outbound.ts.
 */

const MAX_URL_LENGTH = 2048;

const blockedIPv4 = new BlockList();
for (const [network, prefix] of [
  ["0.0.0.0", 8], // "this network", unspecified
  ["10.0.0.0", 8],
  ["100.64.0.0", 10], // CGNAT; also holds 100.100.100.200, Alibaba Cloud metadata
  ["127.0.0.0", 8],
  ["169.254.0.0", 16], // link-local, incl. 169.254.169.254 metadata (AWS, GCP, Azure, ...)
  ["172.16.0.0", 12],
  ["192.0.0.0", 24], // IETF protocol assignments
  ["192.0.2.0", 24], // documentation
  ["192.168.0.0", 16],
  ["198.18.0.0", 15], // benchmarking; also used for "fake IP" DNS by proxies
  ["198.51.100.0", 24], // documentation
  ["203.0.113.0", 24], // documentation
  ["224.0.0.0", 4], // multicast
  ["240.0.0.0", 4], // reserved, incl. broadcast 255.255.255.255
] as const) {
  blockedIPv4.addSubnet(network, prefix, "ipv4");
}

const blockedIPv6 = new BlockList();
for (const [network, prefix] of [
  ["::", 128],
  ["::1", 128],
  ["100::", 64], // discard-only
  ["2001::", 32], // Teredo: tunnels to an obfuscated IPv4 we do not try to decode
  ["2001:db8::", 32], // documentation
  ["64:ff9b:1::", 48], // local-use NAT64
  ["fc00::", 7], // unique local, incl. fd00:ec2::254 (AWS metadata over IPv6)
  ["fe80::", 10], // link-local
  ["fec0::", 10], // deprecated site-local
  ["ff00::", 8], // multicast
] as const) {
  blockedIPv6.addSubnet(network, prefix, "ipv6");
}

/** The eight 16-bit groups of a valid IPv6 address (zone id dropped, trailing dotted quad folded in). */
function ipv6Groups(ip: string): number[] {
  let text = ip.toLowerCase().split("%")[0]!;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = text.slice(0, dotted.index) + `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split("::") as [string, string | undefined];
  const start = head ? head.split(":") : [];
  const end = tail ? tail.split(":") : [];
  const groups = tail === undefined ? start : [...start, ...Array<string>(8 - start.length - end.length).fill("0"), ...end];
  return groups.map((group) => parseInt(group, 16));
}

/** The IPv4 address an IPv6 address stands for (mapped, compatible, SIIT, NAT64, 6to4), if any. */
function embeddedIPv4(groups: number[]): string | null {
  const g = (i: number) => groups[i] ?? 0;
  const quad = (hi: number, lo: number) => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
  const zeroPrefix = [0, 1, 2, 3].every((i) => g(i) === 0);
  if (zeroPrefix && ((g(4) === 0 && (g(5) === 0xffff || g(5) === 0)) || (g(4) === 0xffff && g(5) === 0))) {
    return quad(g(6), g(7)); // ::ffff:a.b.c.d, ::a.b.c.d (so :: and ::1 land in 0.0.0.0/8), ::ffff:0:a.b.c.d
  }
  if (g(0) === 0x64 && g(1) === 0xff9b && [2, 3, 4, 5].every((i) => g(i) === 0)) return quad(g(6), g(7));
  if (g(0) === 0x2002) return quad(g(1), g(2));
  return null;
}

/** True only for a well-formed IP address that is routable on the public internet; anything else fails closed. */
export function isPublicAddress(ip: string): boolean {
  const family = isIP(ip);
  if (family === 4) return !blockedIPv4.check(ip, "ipv4");
  if (family !== 6) return false;
  const address = ip.split("%")[0]!;
  const v4 = embeddedIPv4(ipv6Groups(address));
  if (v4 !== null) return isPublicAddress(v4);
  return !blockedIPv6.check(address, "ipv6");
}

/** What a refusal of a private address adds when the caller may lift it (test mode only). */
export const ALLOW_PRIVATE_HINT = "set ALLOW_PRIVATE_URLS=true to allow it in test mode";

export interface CheckOutboundUrlOptions {
  requireHttps: boolean;
  /** Development and tests only: lets a gateway deliver to endpoints on its own machine or network. */
  allowPrivate: boolean;
  /** The input field the URL came from, named in refusals (default "url"). */
  field?: string;
  /** Name the setting that allows private addresses in the refusal (test mode; live mode never allows them). */
  suggestSetting?: boolean;
  /** What to suggest instead of the setting (a webhook endpoint's own "Allow local URLs"). */
  hint?: string;
  /** Resolves a host name to its addresses; injected by tests, which have no DNS. */
  lookup?: (host: string) => Promise<string[]>;
}

async function resolveAll(host: string): Promise<string[]> {
  return (await dnsLookupAll(host, { all: true })).map((entry) => entry.address);
}

/**
 * Validates a merchant-supplied URL when it is saved. The answer can change after this (DNS rebinding),
 * so delivery must also connect through guardedLookup.
 */
export async function checkOutboundUrl(raw: string, options: CheckOutboundUrlOptions): Promise<URL> {
  const refuse = (problem: string) => new ValidationError(options.field ?? "url", problem);
  const refusePrivate = (problem: string) => refuse(options.suggestSetting ? `${problem}; ${options.hint ?? ALLOW_PRIVATE_HINT}` : problem);
  if (raw.length > MAX_URL_LENGTH) throw refuse(`must be at most ${MAX_URL_LENGTH} characters`);
  // The URL parser silently drops tabs and newlines, so "http://exa\nmple.com" would pass as another host.
  if (/[\s\x00-\x1f\x7f]/.test(raw)) throw refuse("must not contain whitespace or control characters");
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw refuse("is not a valid URL");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw refuse("must use http or https");
  if (options.requireHttps && url.protocol !== "https:") throw refuse("must use https");
  if (url.username || url.password) throw refuse("must not contain a username or password");
  if (options.allowPrivate) return url;

  // The parser has already canonicalised IP literals (0x7f.1 and 2130706433 become 127.0.0.1).
  const host = url.hostname.replace(/^\[|\]$/g, "").replace(/\.$/, "").toLowerCase();
  if (host === "localhost" || host.endsWith(".localhost")) throw refusePrivate("must not point to localhost");
  let addresses: string[];
  if (isIP(host)) {
    addresses = [host];
  } else {
    try {
      addresses = await (options.lookup ?? resolveAll)(host);
    } catch {
      addresses = [];
    }
    if (addresses.length === 0) throw refuse(`host ${host} does not resolve`);
  }
  // Not naming the address: the resolver may see internal names, and the answer would leak them.
  if (!addresses.every(isPublicAddress)) throw refusePrivate("must not point to a private, loopback or reserved address");
  return url;
}

/**
 * A `lookup` for http.request/net.connect that refuses non-public answers at connect time, which defeats
 * DNS rebinding between checkOutboundUrl and delivery. Node skips `lookup` for IP-literal hosts, so those
 * are checked by postOutbound itself (a literal cannot rebind).
 */
export function guardedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses: LookupAddress[]) => {
      if (error) return callback(error, options.all ? [] : "");
      if (!allowPrivate && !addresses.every((entry) => isPublicAddress(entry.address))) {
        const refused: NodeJS.ErrnoException = new Error(`address not allowed: ${hostname} resolves to a non-public address`);
        refused.code = "EADDRNOTALLOWED";
        return callback(refused, options.all ? [] : "");
      }
      if (options.all) return callback(null, addresses);
      const first = addresses[0];
      if (!first) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: "ENOTFOUND" }), "");
      callback(null, first.address, first.family);
    });
  };
}
