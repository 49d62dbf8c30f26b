/**
 * Packing a custom template build: the spec and the build context as a tar
 * stream (ustar), the spec as the `.pandastack-spec` entry. Pure TypeScript,
 * no dependencies: the context is given as a map of relative path to bytes.
 */

export const SPEC_ENTRY = ".pandastack-spec";

const enc = new TextEncoder();

function header(name: string, size: number, mode: number): Uint8Array {
  const h = new Uint8Array(512);
  const put = (s: string, off: number, len: number) => h.set(enc.encode(s).subarray(0, len), off);
  const field = (n: number, off: number, len: number) => put(n.toString(8).padStart(len - 1, "0") + "\0", off, len);
  let prefix = "";
  let base = name;
  if (enc.encode(name).length > 100) {
    const i = name.lastIndexOf("/", 155);
    if (i <= 0 || enc.encode(name.slice(i + 1)).length > 100) throw new Error(`path too long for a build context: ${name}`);
    prefix = name.slice(0, i);
    base = name.slice(i + 1);
  }
  put(base, 0, 100);
  field(mode, 100, 8);
  field(0, 108, 8);
  field(0, 116, 8);
  field(size, 124, 12);
  field(Math.floor(Date.now() / 1000), 136, 12);
  h.fill(0x20, 148, 156); // checksum computed with spaces
  h[156] = 0x30; // regular file
  put("ustar\0", 257, 6);
  put("00", 263, 2);
  put(prefix, 345, 155);
  let sum = 0;
  for (const b of h) sum += b;
  put(sum.toString(8).padStart(6, "0") + "\0 ", 148, 8);
  return h;
}

/**
 * Packs a spec and a build context (relative path → content) into the tar
 * stream a custom build uploads. Paths must be relative and stay inside the
 * context; the server checks again.
 */
export function packBuildContext(spec: string | Uint8Array, files: Record<string, string | Uint8Array> = {}): Uint8Array {
  const parts: Uint8Array[] = [];
  const add = (name: string, data: Uint8Array) => {
    parts.push(header(name, data.length, 0o644), data);
    const pad = (512 - (data.length % 512)) % 512;
    if (pad) parts.push(new Uint8Array(pad));
  };
  add(SPEC_ENTRY, typeof spec === "string" ? enc.encode(spec) : spec);
  for (const [name, content] of Object.entries(files)) {
    if (name.startsWith("/") || name.split("/").includes("..")) throw new Error(`build context path leads outside the context: ${name}`);
    add(name, typeof content === "string" ? enc.encode(content) : content);
  }
  parts.push(new Uint8Array(1024));
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}
