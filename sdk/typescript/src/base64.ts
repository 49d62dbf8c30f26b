// Standard base64 (RFC 4648, with padding) for Uint8Array, written here so
// the SDK needs neither Buffer nor atob/btoa with their binary-string detour.

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const DECODE = new Int16Array(256).fill(-1);
for (let i = 0; i < ALPHABET.length; i++) DECODE[ALPHABET.charCodeAt(i)] = i;
// Be lenient and accept the URL-safe alphabet too.
DECODE["-".charCodeAt(0)] = 62;
DECODE["_".charCodeAt(0)] = 63;

/** Encodes bytes as standard, padded base64. */
export function encodeBase64(bytes: Uint8Array): string {
  let out = "";
  const chunk: string[] = [];
  const n = bytes.length;
  let i = 0;
  for (; i + 2 < n; i += 3) {
    const v = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    chunk.push(
      ALPHABET[(v >> 18) & 63]! + ALPHABET[(v >> 12) & 63]! + ALPHABET[(v >> 6) & 63]! + ALPHABET[v & 63]!,
    );
    if (chunk.length === 4096) {
      out += chunk.join("");
      chunk.length = 0;
    }
  }
  if (i < n) {
    const a = bytes[i]!;
    const b = i + 1 < n ? bytes[i + 1]! : 0;
    const v = (a << 16) | (b << 8);
    chunk.push(
      ALPHABET[(v >> 18) & 63]! + ALPHABET[(v >> 12) & 63]! + (i + 1 < n ? ALPHABET[(v >> 6) & 63]! : "=") + "=",
    );
  }
  return out + chunk.join("");
}

/**
 * Decodes base64 (standard or URL-safe, padding optional, ASCII whitespace
 * ignored). Throws a TypeError on any other character or a bad length.
 */
export function decodeBase64(text: string): Uint8Array {
  let len = text.length;
  // Strip padding (and whitespace around it).
  for (;;) {
    const c = len > 0 ? text.charCodeAt(len - 1) : -1;
    if (c === 61 /* = */ || c === 32 || c === 9 || c === 10 || c === 13) len--;
    else break;
  }
  const out = new Uint8Array(Math.floor((len * 3) / 4));
  let acc = 0;
  let bits = 0;
  let o = 0;
  for (let i = 0; i < len; i++) {
    const c = text.charCodeAt(i);
    const v = c < 256 ? DECODE[c]! : -1;
    if (v < 0) {
      if (c === 32 || c === 9 || c === 10 || c === 13) continue;
      throw new TypeError(`invalid base64 character ${JSON.stringify(text[i])} at ${i}`);
    }
    acc = ((acc << 6) | v) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (acc >> bits) & 0xff;
    }
  }
  if (bits >= 6) throw new TypeError("invalid base64 length");
  return o === out.length ? out : out.subarray(0, o);
}
