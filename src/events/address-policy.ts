/**
 * Which IP addresses a webhook may reach. Only public unicast addresses pass; loopback is its
 * own class so development and tests can allow it alone. An IPv6 address that carries an IPv4
 * one (IPv4-mapped, NAT64, 6to4) is judged by the IPv4 address inside, since
 * that is where the packets end up. Pure.
 */
import { isIP } from "node:net";

export type AddressClass = "public" | "loopback" | "private";

type Range = readonly [prefix: number[], bits: number];

// Everything not globally routable unicast: RFC 6890 special-purpose registries, multicast included.
const PRIVATE_V4: Range[] = [
  [[0], 8], // "this network"
  [[10], 8],
  [[100, 64], 10], // carrier-grade NAT
  [[169, 254], 16], // link-local, cloud metadata
  [[172, 16], 12],
  [[192, 0, 0], 24], // IETF protocol assignments
  [[192, 0, 2], 24], // documentation
  [[192, 88, 99], 24], // 6to4 relay anycast
  [[192, 168], 16],
  [[198, 18], 15], // benchmarking
  [[198, 51, 100], 24],
  [[203, 0, 113], 24],
  [[224], 4], // multicast
  [[240], 4], // reserved, broadcast
];

// Special ranges inside 2000::/3 (everything outside it, ULA fc00::/7, link-local fe80::/10 and
// multicast ff00::/8 included, is refused before these are consulted).
const PRIVATE_V6: Range[] = [
  [[0x20, 0x01, 0x00, 0x00], 23], // IETF protocol assignments (Teredo and friends)
  [[0x20, 0x01, 0x0d, 0xb8], 32], // documentation
];

function inRange(bytes: Uint8Array, [prefix, bits]: Range): boolean {
  for (let i = 0; i < bits; i++) {
    const byte = prefix[i >> 3] ?? 0;
    const mask = 0x80 >> (i & 7);
    if ((bytes[i >> 3]! & mask) !== (byte & mask)) return false;
  }
  return true;
}

function parseV4(text: string): Uint8Array {
  return Uint8Array.from(text.split(".").map(Number));
}

/** 16 bytes from any valid IPv6 text form ("::", embedded dotted quad, zone id dropped). */
export function parseV6(text: string): Uint8Array {
  const address = text.replace(/%.*$/, "");
  let tail: number[] = [];
  let body = address;
  const quad = /(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  if (quad) {
    const v4 = parseV4(quad[1]!);
    tail = [(v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!];
    body = address.slice(0, -quad[1]!.length);
    if (body.endsWith(":") && !body.endsWith("::")) body = body.slice(0, -1);
  }
  const [head, rest] = body.split("::") as [string, string | undefined];
  const parse = (part: string) => (part === "" ? [] : part.split(":").map((h) => parseInt(h, 16)));
  const left = parse(head);
  const right = [...(rest === undefined ? [] : parse(rest)), ...tail];
  const groups = rest === undefined ? [...left, ...right] : [...left, ...new Array(8 - left.length - right.length).fill(0), ...right];
  const bytes = new Uint8Array(16);
  groups.forEach((g: number, i: number) => {
    bytes[2 * i] = g >> 8;
    bytes[2 * i + 1] = g & 0xff;
  });
  return bytes;
}

function classifyV4(b: Uint8Array): AddressClass {
  if (b[0] === 127) return "loopback";
  return PRIVATE_V4.some((r) => inRange(b, r)) ? "private" : "public";
}

/** The IPv4 address an IPv6 one stands for, if it embeds one. */
function embeddedV4(b: Uint8Array): Uint8Array | undefined {
  const zeros = (from: number, to: number) => b.subarray(from, to).every((x) => x === 0);
  if (zeros(0, 10) && b[10] === 0xff && b[11] === 0xff) return b.slice(12); // ::ffff:a.b.c.d
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zeros(4, 12)) return b.slice(12); // 64:ff9b::/96
  if (b[0] === 0x20 && b[1] === 0x02) return b.slice(2, 6); // 2002:V4ADDR::/48
  return undefined;
}

function classifyV6(b: Uint8Array): AddressClass {
  const v4 = embeddedV4(b);
  if (v4) return classifyV4(v4);
  if (b.every((x, i) => x === (i === 15 ? 1 : 0))) return "loopback";
  // The rest of ::/96: unspecified and the deprecated IPv4-compatible form, routed nowhere sane.
  if (b.subarray(0, 12).every((x) => x === 0)) return "private";
  // Only 2000::/3 is allocated for global unicast; the rest is reserved or special.
  if (!inRange(b, [[0x20], 3])) return "private";
  return PRIVATE_V6.some((r) => inRange(b, r)) ? "private" : "public";
}

/** Classifies an IP address in text form; anything that is not an IP address is "private". */
export function classifyAddress(address: string): AddressClass {
  const bare = address.startsWith("[") && address.endsWith("]") ? address.slice(1, -1) : address;
  switch (isIP(bare.replace(/%.*$/, ""))) {
    case 4:
      return classifyV4(parseV4(bare));
    case 6:
      return classifyV6(parseV6(bare));
    default:
      return "private";
  }
}
