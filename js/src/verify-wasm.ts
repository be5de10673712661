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

import { NwbError, type NwbErrorKind } from './errors.js';
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
  nw_render_records(len: number, at: number, count: number, cap: number, recordsCap: number): number;
  nw_zstd_load_set(len: number): number;
  nw_zstd_sets(): number;
  nw_zstd_use_set(index: number): number;
  nw_check_list(len: number, count: number): number;
}

// nw_check_list's codes (crates/verify-wasm/src/render.rs, ListError).
const LIST_ERRORS: Record<number, NwbErrorKind> = {
  [-2]: 'truncated',
  [-3]: 'record_too_large',
  [-4]: 'bad_version',
  [-5]: 'trailing_bytes',
  [-6]: 'varint_overflow',
  [-7]: 'overlong_varint',
};

// Verdicts: 1 valid, 0 invalid, -1 for the JavaScript verifier to decide
// (verify.ts reads the numbers: importing them would pull this module, and
// the embedded verifier, into the entry chunk).
const INVALID = 0;
const UNDECIDED = -1;

/** A batch decoded by the module (`renderRecords`). */
export interface Rendered {
  events: (Event | null)[];
  /** With `withRecords`: the record of each event (null where the event is). */
  records: (Uint8Array | null)[] | null;
}

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
  /**
   * The records of a nostrwire.v2 batch as events, decoded by the module
   * (crates/verify-wasm/src/render.rs) and built by `JSON.parse`: `list` is
   * the batch's bytes from its first record's length on, `count` its
   * records. The list is checked first as `decodeRelayFrameV2` checks it
   * (with the default limits): {@link NwbError} with the same kind.
   * `events[i]` is null where the JavaScript decoder must take the record
   * (one that breaks a rule, or that the module cannot decompress). `set`:
   * the dictionary set file the records may name (loaded into the module
   * once, until another set is given). With `withRecords`, `records[i]` is
   * the event record of `events[i]` (decompressed), for the verifier.
   */
  renderRecords(list: Uint8Array, count: number, set?: Uint8Array | null, withRecords?: boolean): Rendered;
  /**
   * Prepares the dictionaries of set file `set` for `renderRecords` and
   * uses them, unless the module holds them prepared already (a few sets);
   * false when the module refuses the set.
   */
  holdDictionarySet(set: Uint8Array): boolean;
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

// BIP-340's test vectors 0-3 (valid signatures, four keys): key, message,
// signature, 128 bytes each, for warmUp.
const WARM_ITEMS =
  'f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f900000000000000000000000000000000' +
  '00000000000000000000000000000000e907831f80848d1069a5371b402410364bdf1c5f8307b0084c55f1ce2dca8215' +
  '25f66a4a85ea8b71e482a74f382d2ce5ebeee8fdb2172f477df4900d310536c0dff1d77f2a671c5f36183726db2341be' +
  '58feae1da2deced843240f7b502ba659243f6a8885a308d313198a2e03707344a4093822299f31d0082efa98ec4e6c89' +
  '6896bd60eeae296db48a229ff71dfe071bde413e6d43f917dc8dcf8c78de33418906d11ac976abccb20b091292bff4ea' +
  '897efcb639ea871cfa95f6de339e4b0add308afec5777e13121fa72b9cc1b7cc0139715309b086c960e18fd969774eb8' +
  '7e2d58d8b3bcdf1abadec7829054f90dda9805aab56c77333024b9d0a508b75c5831aaeed7b44bb74e5eab94ba9d4294' +
  'c49bcf2a60728d8b4c200f50dd313c1bab745879a5ad954a72c45a91c3a51d3c7adea98d82f8481e0e1e03674a6f3fb7' +
  '25d1dff95105f5253c4022f628a996ad3a0d95fbf21d468a1b33f8c160d8f517ffffffffffffffffffffffffffffffff' +
  'ffffffffffffffffffffffffffffffff7eb0509757e246f19449885651611cb965ecc1a187dd51b64fda1edc9637d5ec' +
  '97582b9cb13db3933705b32ba982af5af25fd78881ebb32771fc5922efc66ea3';

/**
 * Runs the verifier's hot code for a few milliseconds, `pause()` between
 * rounds: engines first run WebAssembly from a quick baseline compilation
 * and optimize the functions that turn out hot in the background, and until
 * then a check costs several times more (about 35 ms for the first 64 in
 * Node). Started at load, this happens before the first events arrive.
 */
export async function warmUp(v: WasmVerifier, pause: () => Promise<void>): Promise<void> {
  const one = new Uint8Array(WARM_ITEMS.length / 2);
  for (let i = 0; i < one.length; i++) one[i] = parseInt(WARM_ITEMS.slice(2 * i, 2 * i + 2), 16);
  const items = new Uint8Array(2 * one.length);
  items.set(one);
  items.set(one, one.length);
  const messages = [5000, 4000, 3000, 2000, 9000].map((n) => new Uint8Array(n));
  // Not the JavaScript packer of event objects: optimized for built-in
  // events, Node 20 then deoptimized it on the first real ones and packed
  // them 10 µs slower each in half of its processes (and never faster).
  for (let round = 0; round < 10; round++) {
    v.verifySignatures(items);
    v.sha256Many(messages);
    await pause();
  }
}

const encoder = new TextEncoder();
const utf8Decoder = new TextDecoder();
// The most JSON one call of renderRecords writes.
const RENDER_CAP_MAX = 8 << 20;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const wellFormed: (s: string) => boolean =
  typeof (String.prototype as { isWellFormed?: unknown }).isWellFormed === 'function'
    ? (s) => (s as string & { isWellFormed(): boolean }).isWellFormed()
    : (s) => !LONE_SURROGATE.test(s);

// `nw_zstd_use_set`'s index of the decoder without dictionaries, and what
// `Verifier.currentSet` is then.
const NO_SET_INDEX = 0xffff_ffff;
const NO_SET = new Uint8Array(0);

// Packing outcome for one event besides "packed".
const SHAPE = -1; // id, pubkey or sig is not lowercase hex of its length: invalid
const OTHER = -2; // something the WebAssembly side does not serialize: JavaScript decides

class Verifier implements WasmVerifier {
  private buf = new Uint8Array(1 << 16);
  private view = new DataView(this.buf.buffer);
  private at = 0;
  private readonly index: number[] = [];
  // The dictionary set files the module holds prepared, in its order, and
  // the one in use (NO_SET: none; null: not known).
  private readonly heldSets: Uint8Array[] = [];
  private currentSet: Uint8Array | null = NO_SET;
  private refusedSet: Uint8Array | null = null;

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

  // The module holds a few sets prepared (crates/verify-wasm, zstd.rs
  // `MAX_HELD_SETS`): a page reading several relays switches between their
  // sets without preparing one again. A set the module refuses (it checks
  // what the JavaScript decoder does, and that zstd takes each dictionary)
  // is not used: the module then decodes with no dictionaries, and leaves
  // records that name one to the JavaScript decoder.
  holdDictionarySet(set: Uint8Array): boolean {
    if (set === this.currentSet) return true;
    if (set === this.refusedSet) {
      this.useNoSet();
      return false;
    }
    const index = this.heldSets.indexOf(set);
    if (index >= 0 && this.x.nw_zstd_use_set(index) === 0) {
      this.currentSet = set;
      return true;
    }
    const ptr = this.x.nw_reserve(0, set.length);
    let loaded = false;
    if (ptr !== 0) {
      new Uint8Array(this.x.memory.buffer, ptr, set.length).set(set);
      loaded = this.x.nw_zstd_load_set(set.length) >= 0;
    }
    // The sets loaded last may have made way for it; it is the last one.
    const held = this.x.nw_zstd_sets();
    this.heldSets.length = Math.min(this.heldSets.length, loaded ? held - 1 : held);
    if (loaded) {
      this.heldSets.push(set);
      this.currentSet = set;
      return true;
    }
    this.refusedSet = set;
    this.currentSet = null;
    this.useNoSet();
    return false;
  }

  // The decoder without dictionaries: records that name one are left to
  // the JavaScript decoder, never read with another relay's set.
  private useNoSet(): void {
    if (this.currentSet === NO_SET) return;
    this.x.nw_zstd_use_set(NO_SET_INDEX);
    this.currentSet = NO_SET;
  }

  clearKeyCache(): void {
    this.x.nw_clear_keys();
  }

  renderRecords(list: Uint8Array, count: number, set?: Uint8Array | null, withRecords = false): Rendered {
    if (set) this.holdDictionarySet(set);
    else this.useNoSet();
    const len = list.length;
    // Records decompress to about three times their size and their JSON
    // adds ~150 bytes each; a list that renders larger takes more calls.
    const cap = Math.min(4 * len + (64 << 10), RENDER_CAP_MAX);
    const recordsCap = withRecords ? cap : 0;
    const headAt = (len + 7) & ~7;
    const jsonAt = headAt + 16;
    const recordsAt = jsonAt + ((cap + 7) & ~7);
    const ptr = this.x.nw_reserve(0, recordsAt + recordsCap);
    if (ptr === 0) throw new RangeError('WebAssembly verifier: out of memory');
    new Uint8Array(this.x.memory.buffer, ptr, len).set(list);
    const checked = this.x.nw_check_list(len, count);
    if (checked !== 0) throw new NwbError(LIST_ERRORS[checked] ?? 'truncated');
    let events: (Event | null)[] = [];
    const records: (Uint8Array | null)[] | null = withRecords ? [] : null;
    let at = 0;
    while (events.length < count) {
      const n = this.x.nw_render_records(len, at, count - events.length, cap, recordsCap);
      if (n <= 0) throw new Error('WebAssembly verifier: malformed batch list');
      const memory = this.x.memory.buffer;
      const head = new DataView(memory, ptr + headAt, 16);
      const text = utf8Decoder.decode(new Uint8Array(memory, ptr + jsonAt, head.getUint32(0, true)));
      at = head.getUint32(4, true);
      const parsed = JSON.parse(text) as (Event | null)[];
      if (records) {
        // One copy out of the module's memory for the call's records.
        const kept = new Uint8Array(memory, ptr + recordsAt, head.getUint32(8, true)).slice();
        const view = new DataView(kept.buffer);
        let p = 0;
        for (const e of parsed) {
          if (e === null) {
            records.push(null);
            continue;
          }
          const size = view.getUint32(p, true);
          records.push(kept.subarray(p + 4, p + 4 + size));
          p += 4 + size;
        }
      }
      events = events.length === 0 ? parsed : events.concat(parsed);
    }
    return { events, records };
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
