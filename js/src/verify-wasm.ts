// The package's WebAssembly verifier: libsecp256k1 (10×26 field) with the
// id's canonical serialization and SHA-256, built from crates/verify-wasm
// by scripts/build-verifier.sh and embedded in verifier-wasm-bytes.ts.
//
// Many events go in per call, packed into one buffer (the layout is in
// crates/verify-wasm/src/lib.rs): id, pubkey and sig as hex characters,
// created_at and kind as f64, tags and content as UTF-8. Events the packer
// cannot give it unchanged (a non-integer number, tags that are not arrays
// of strings, strings with lone surrogates, whose JSON.stringify form the
// WebAssembly side does not write) are marked for the JavaScript verifier.

import { VERIFIER_WASM } from './verifier-wasm-bytes.js';
import type { Event } from './types.js';

interface Exports {
  memory: WebAssembly.Memory;
  nw_verify_signatures(count: number, len: number): number;
  nw_clear_keys(): void;
  nw_reserve(count: number, len: number): number;
  nw_verdicts(): number;
  nw_verify_events(count: number, len: number): number;
  nw_verify_records(count: number, len: number): number;
  nw_sha256_many(count: number, len: number): number;
}

// Verdicts: 1 valid, 0 invalid, -1 for the JavaScript verifier to decide
// (verify.ts reads the numbers: importing them would pull this module, and
// the embedded verifier, into the entry chunk).
const INVALID = 0;
const UNDECIDED = -1;

export interface WasmVerifier {
  /** Verdicts for `events[from..to)` into `out[from..to)`. */
  verifyEvents(events: readonly Event[], from: number, to: number, out: Int8Array): void;
  /** Verdicts for nwb event records `records[from..to)` into `out[from..to)` (never UNDECIDED). */
  verifyRecords(records: readonly Uint8Array[], from: number, to: number, out: Int8Array): void;
  /**
   * Bare BIP-340 checks, for the official vectors: per item a 32-byte
   * x-only key, a 32-byte message and a 64-byte signature; 1 or 0 each.
   */
  verifySignatures(items: Uint8Array): Uint8Array;
  /** Forgets the parsed keys it caches (for benchmarks of cold caches). */
  clearKeyCache(): void;
  /**
   * SHA-256 of each message, hashed four at a time as ids are: the digests,
   * 32 bytes each, in order. For the tests of the hash.
   * @internal
   */
  sha256Many(messages: readonly Uint8Array[]): Uint8Array;
}

function base64Bytes(s: string): Uint8Array<ArrayBuffer> {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/**
 * Compiles and instantiates the verifier (or another build of the crate, for
 * the benchmarks); rejects where WebAssembly cannot run.
 */
export async function loadVerifier(bytes?: Uint8Array<ArrayBuffer>): Promise<WasmVerifier> {
  const module = await WebAssembly.compile(bytes ?? base64Bytes(VERIFIER_WASM));
  const instance = await WebAssembly.instantiate(module);
  return new Verifier(instance.exports as unknown as Exports);
}

const encoder = new TextEncoder();
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const wellFormed: (s: string) => boolean =
  typeof (String.prototype as { isWellFormed?: unknown }).isWellFormed === 'function'
    ? (s) => (s as string & { isWellFormed(): boolean }).isWellFormed()
    : (s) => !LONE_SURROGATE.test(s);

// Packing outcome for one event besides "packed".
const SHAPE = -1; // id, pubkey or sig is not lowercase hex of its length: invalid
const OTHER = -2; // something the WebAssembly side does not serialize: JavaScript decides

class Verifier implements WasmVerifier {
  private buf = new Uint8Array(1 << 16);
  private view = new DataView(this.buf.buffer);
  private at = 0;
  private readonly index: number[] = [];

  constructor(private readonly x: Exports) {}

  private ensure(n: number): void {
    if (n <= this.buf.length) return;
    let size = this.buf.length;
    while (size < n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.at));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }

  // Lowercase hex of exactly `len` characters, as ASCII bytes.
  private hex(s: unknown, len: number): boolean {
    if (typeof s !== 'string' || s.length !== len) return false;
    const buf = this.buf;
    const at = this.at;
    for (let i = 0; i < len; i++) {
      const c = s.charCodeAt(i);
      if (!((c >= 48 && c <= 57) || (c >= 97 && c <= 102))) return false;
      buf[at + i] = c;
    }
    this.at += len;
    return true;
  }

  // A u32 length and the UTF-8 of `s`; false for lone surrogates. Strings
  // up to a few hundred ASCII characters (tag values: ids, keys, URLs) are
  // copied here; longer ones go through the engine's encoder, which is
  // faster once its call is paid for.
  private str(s: string): boolean {
    const n = s.length;
    this.ensure(this.at + 4 + 3 * n);
    const buf = this.buf;
    let p = this.at + 4;
    let i = 0;
    if (n <= 256) {
      for (; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) break;
        buf[p++] = c;
      }
    }
    if (i < n) {
      if (!wellFormed(s)) return false;
      p += encoder.encodeInto(i === 0 ? s : s.slice(i), buf.subarray(p)).written;
    }
    this.view.setUint32(this.at, p - this.at - 4, true);
    this.at = p;
    return true;
  }

  // One event at `this.at`: its entry's end, or SHAPE or OTHER (and
  // `this.at` back where it was).
  private pack(e: Event): number {
    const start = this.at;
    this.ensure(start + 4 + 256 + 16 + 4);
    this.at += 4;
    if (!this.hex(e.id, 64) || !this.hex(e.pubkey, 64) || !this.hex(e.sig, 128)) {
      this.at = start;
      return SHAPE;
    }
    const { created_at, kind, tags, content } = e;
    if (!Number.isSafeInteger(created_at) || !Number.isSafeInteger(kind) || !Array.isArray(tags) || typeof content !== 'string') {
      this.at = start;
      return OTHER;
    }
    this.view.setFloat64(this.at, created_at, true);
    this.view.setFloat64(this.at + 8, kind, true);
    this.view.setUint32(this.at + 16, tags.length, true);
    this.at += 20;
    for (const tag of tags) {
      if (!Array.isArray(tag)) {
        this.at = start;
        return OTHER;
      }
      this.ensure(this.at + 4);
      this.view.setUint32(this.at, tag.length, true);
      this.at += 4;
      for (const item of tag) {
        if (typeof item !== 'string' || !this.str(item)) {
          this.at = start;
          return OTHER;
        }
      }
    }
    if (!this.str(content)) {
      this.at = start;
      return OTHER;
    }
    this.view.setUint32(start, this.at - start - 4, true);
    return this.at;
  }

  // Copies the packed bytes into the module and runs `run`; the verdicts.
  private call(count: number, run: (count: number, len: number) => number): Uint8Array {
    const len = this.at;
    const ptr = this.x.nw_reserve(count, len);
    if (ptr === 0) throw new RangeError('WebAssembly verifier: out of memory');
    new Uint8Array(this.x.memory.buffer, ptr, len).set(this.buf.subarray(0, len));
    if (run(count, len) < 0) throw new Error('WebAssembly verifier: malformed input (a bug in the packer)');
    return new Uint8Array(this.x.memory.buffer, this.x.nw_verdicts(), count);
  }

  verifyEvents(events: readonly Event[], from: number, to: number, out: Int8Array): void {
    this.at = 0;
    const index = this.index;
    index.length = 0;
    for (let i = from; i < to; i++) {
      const r = this.pack(events[i]!);
      if (r === SHAPE) out[i] = INVALID;
      else if (r === OTHER) out[i] = UNDECIDED;
      else index.push(i);
    }
    if (index.length === 0) return;
    const verdicts = this.call(index.length, (c, l) => this.x.nw_verify_events(c, l));
    for (let k = 0; k < index.length; k++) out[index[k]!] = verdicts[k]!;
  }

  verifyRecords(records: readonly Uint8Array[], from: number, to: number, out: Int8Array): void {
    let size = 0;
    for (let i = from; i < to; i++) size += 4 + records[i]!.length;
    this.at = 0;
    this.ensure(size);
    for (let i = from; i < to; i++) {
      const r = records[i]!;
      this.view.setUint32(this.at, r.length, true);
      this.buf.set(r, this.at + 4);
      this.at += 4 + r.length;
    }
    const verdicts = this.call(to - from, (c, l) => this.x.nw_verify_records(c, l));
    for (let i = from; i < to; i++) out[i] = verdicts[i - from]!;
  }

  verifySignatures(items: Uint8Array): Uint8Array {
    if (items.length % 128 !== 0) throw new RangeError('signature items are 128 bytes each');
    this.at = 0;
    this.ensure(items.length);
    this.buf.set(items);
    this.at = items.length;
    return this.call(items.length / 128, (c, l) => this.x.nw_verify_signatures(c, l)).slice();
  }

  clearKeyCache(): void {
    this.x.nw_clear_keys();
  }

  sha256Many(messages: readonly Uint8Array[]): Uint8Array {
    let size = 0;
    for (const m of messages) size += 4 + m.length;
    this.at = 0;
    this.ensure(size);
    for (const m of messages) {
      this.view.setUint32(this.at, m.length, true);
      this.buf.set(m, this.at + 4);
      this.at += 4 + m.length;
    }
    const count = messages.length;
    const ptr = this.x.nw_reserve(32 * count, this.at);
    if (ptr === 0) throw new RangeError('WebAssembly verifier: out of memory');
    new Uint8Array(this.x.memory.buffer, ptr, this.at).set(this.buf.subarray(0, this.at));
    if (this.x.nw_sha256_many(count, this.at) !== count) throw new Error('WebAssembly verifier: malformed input');
    return new Uint8Array(this.x.memory.buffer, this.x.nw_verdicts(), 32 * count).slice();
  }
}
