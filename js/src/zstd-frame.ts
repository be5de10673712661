// A zstd decoder (RFC 8878) for the frames inside compressed records
// (spec/nwb.md §11): one magicless frame, decompressed in one call into an
// output buffer of exactly the size the record header names, optionally
// with a zstd dictionary (RFC 8878 §5) prepared once.
//
// It never allocates more than the output it is given (plus its tables and
// a literals buffer no larger than that output), checks every length
// against what remains of the input and of the output, and reports any
// malformed input by throwing a `ZstdError`.

/** Malformed zstd data (a frame or a dictionary). */
export class ZstdError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ZstdError';
  }
}

function fail(message: string): never {
  throw new ZstdError(message);
}

// ---------------------------------------------------------------- tables

/** An FSE decoding table (RFC 8878 §4.1.1). */
interface Fse {
  /** Accuracy log: the state has this many bits. */
  log: number;
  symbol: Uint8Array;
  bits: Uint8Array;
  base: Uint16Array;
}

/** A Huffman decoding table for literals (RFC 8878 §4.2.1). */
interface Huffman {
  maxBits: number;
  symbol: Uint8Array;
  bits: Uint8Array;
}

/** A prepared zstd dictionary (RFC 8878 §5). */
export interface ZstdDictionary {
  /** The dictionary id in its header; 0 for a raw-content dictionary. */
  readonly id: number;
  /** Content that precedes the output: matches may reach into it. */
  readonly content: Uint8Array;
  readonly huffman: Huffman | null;
  readonly ll: Fse | null;
  readonly of: Fse | null;
  readonly ml: Fse | null;
  readonly rep: readonly [number, number, number];
}

const highBit = (v: number): number => 31 - Math.clz32(v);

/** A table to build into, for `size` states. */
const fseTable = (size: number): Fse => ({ log: 0, symbol: new Uint8Array(size), bits: new Uint8Array(size), base: new Uint16Array(size) });

const NEXT = new Uint16Array(256);
const NORM = new Int16Array(256);

/**
 * Builds the decoding table of normalized counts `norm` (RFC 8878 §4.1.1),
 * into `into` (a frame's scratch table) or a new one.
 */
function buildFse(norm: Int16Array, symbols: number, log: number, into: Fse = fseTable(1 << log)): Fse {
  const size = 1 << log;
  const { symbol, bits, base } = into;
  into.log = log;
  const next = NEXT;
  let high = size - 1;
  for (let s = 0; s < symbols; s++) {
    if (norm[s] === -1) {
      symbol[high--] = s;
      next[s] = 1;
    } else next[s] = norm[s]!;
  }
  const step = (size >> 1) + (size >> 3) + 3;
  const mask = size - 1;
  let pos = 0;
  for (let s = 0; s < symbols; s++) {
    const n = norm[s]!;
    for (let i = 0; i < n; i++) {
      symbol[pos] = s;
      do pos = (pos + step) & mask;
      while (pos > high);
    }
  }
  if (pos !== 0) fail('bad FSE table');
  for (let u = 0; u < size; u++) {
    const state = next[symbol[u]!]!++;
    const nb = log - highBit(state);
    bits[u] = nb;
    base[u] = (state << nb) - size;
  }
  return into;
}

/** A table that always yields `s` (RLE mode). */
function rleFse(s: number): Fse {
  return { log: 0, symbol: new Uint8Array([s]), bits: new Uint8Array(1), base: new Uint16Array(1) };
}

/**
 * Reads an FSE table description (RFC 8878 §4.1.1) at `src[at..end)`, into
 * `into` or a new table; returns the table and the position after it.
 */
function readFse(src: Uint8Array, at: number, end: number, maxSymbol: number, maxLog: number, into?: Fse): [Fse, number] {
  if (at >= end) fail('truncated FSE table');
  let bit = at * 8;
  const peek = (n: number): number => {
    const b = bit >> 3;
    const v = (src[b]! | (src[b + 1]! << 8) | (src[b + 2]! << 16)) >>> (bit & 7);
    return v & ((1 << n) - 1);
  };
  const log = peek(4) + 5;
  bit += 4;
  if (log > maxLog) fail('FSE accuracy too high');
  const norm = NORM;
  let remaining = (1 << log) + 1;
  let threshold = 1 << log;
  let nbBits = log + 1;
  let s = 0;
  let previous0 = false;
  while (remaining > 1 && s <= maxSymbol) {
    if (previous0) {
      let n0 = s;
      while (peek(16) === 0xffff) {
        n0 += 24;
        bit += 16;
        if (bit > end * 8) fail('truncated FSE table');
      }
      while (peek(2) === 3) {
        n0 += 3;
        bit += 2;
      }
      n0 += peek(2);
      bit += 2;
      if (n0 > maxSymbol) fail('bad FSE table');
      while (s < n0) norm[s++] = 0;
    }
    const max = 2 * threshold - 1 - remaining;
    let count: number;
    const low = peek(nbBits - 1);
    if (low < max) {
      count = low;
      bit += nbBits - 1;
    } else {
      count = peek(nbBits);
      if (count >= threshold) count -= max;
      bit += nbBits;
    }
    count--;
    remaining -= count < 0 ? -count : count;
    norm[s++] = count;
    previous0 = count === 0;
    while (remaining < threshold && threshold > 1) {
      nbBits--;
      threshold >>= 1;
    }
    if (bit > end * 8) fail('truncated FSE table');
  }
  if (remaining !== 1) fail('bad FSE table');
  const after = (bit + 7) >> 3;
  if (after > end) fail('truncated FSE table');
  return [buildFse(norm, s, log, into), after];
}

const WEIGHTS = new Uint8Array(256);
const WEIGHTS_FSE = fseTable(64);

/**
 * The n <= 16 bits of `src` from bit `bit` on, the bits below bit `floor`
 * read as zero (the start of a backward stream, RFC 8878 §4.1).
 */
const bitsAbove = (src: Uint8Array, bit: number, n: number, floor: number): number => {
  if (bit >= floor) return bitsAt(src, bit, n);
  const have = n - (floor - bit);
  return have <= 0 ? 0 : bitsAt(src, floor, have) << (n - have);
};

/**
 * Reads a Huffman tree description (RFC 8878 §4.2.1) at `src[at..end)`;
 * returns the table and the position after it.
 */
function readHuffman(src: Uint8Array, at: number, end: number, into?: Huffman): [Huffman, number] {
  if (at >= end) fail('truncated Huffman table');
  const header = src[at++]!;
  const weights = WEIGHTS;
  let count = 0;
  if (header < 128) {
    // FSE-compressed weights: two interleaved states over one backward stream.
    const stop = at + header;
    if (stop > end) fail('truncated Huffman table');
    const [fse, start] = readFse(src, at, stop, 255, 6, WEIGHTS_FSE);
    const last = src[stop - 1]!;
    if (last === 0 || start >= stop) fail('bad Huffman table');
    let pos = stop * 8 - 8 + highBit(last);
    const floor = start * 8;
    let s1 = bitsAbove(src, (pos -= fse.log), fse.log, floor);
    let s2 = bitsAbove(src, (pos -= fse.log), fse.log, floor);
    // As zstd: each state yields its symbol, then reads its next state; once
    // the stream is overread, the other state's symbol is the last.
    for (;;) {
      if (count > 253) fail('bad Huffman table');
      weights[count++] = fse.symbol[s1]!;
      const n1 = fse.bits[s1]!;
      s1 = fse.base[s1]! + bitsAbove(src, (pos -= n1), n1, floor);
      if (pos < floor) {
        weights[count++] = fse.symbol[s2]!;
        break;
      }
      weights[count++] = fse.symbol[s2]!;
      const n2 = fse.bits[s2]!;
      s2 = fse.base[s2]! + bitsAbove(src, (pos -= n2), n2, floor);
      if (pos < floor) {
        weights[count++] = fse.symbol[s1]!;
        break;
      }
    }
    at = stop;
  } else {
    count = header - 127;
    const bytes = (count + 1) >> 1;
    if (at + bytes > end) fail('truncated Huffman table');
    for (let i = 0; i < count; i += 2) {
      const b = src[at + (i >> 1)]!;
      weights[i] = b >> 4;
      weights[i + 1] = b & 15;
    }
    at += bytes;
  }
  // The last symbol's weight is implied: the total becomes a power of two.
  let total = 0;
  for (let i = 0; i < count; i++) {
    const w = weights[i]!;
    if (w > 11) fail('bad Huffman weight');
    if (w) total += 1 << (w - 1);
  }
  if (total === 0) fail('bad Huffman table');
  const maxBits = highBit(total) + 1;
  if (maxBits > 11) fail('bad Huffman table');
  const rest = (1 << maxBits) - total;
  if (rest & (rest - 1)) fail('bad Huffman table');
  weights[count++] = highBit(rest) + 1;
  const size = 1 << maxBits;
  const table = into ?? { maxBits, symbol: new Uint8Array(size), bits: new Uint8Array(size) };
  table.maxBits = maxBits;
  const { symbol, bits } = table;
  // Codes in order of increasing weight (longest codes first), each symbol
  // filling 2^(weight - 1) entries.
  const rankStart = new Uint32Array(maxBits + 2);
  const perWeight = new Uint32Array(maxBits + 2);
  for (let i = 0; i < count; i++) perWeight[weights[i]!]!++;
  let next = 0;
  for (let w = 1; w <= maxBits; w++) {
    rankStart[w] = next;
    next += perWeight[w]! << (w - 1);
  }
  if (next !== size) fail('bad Huffman table');
  for (let i = 0; i < count; i++) {
    const w = weights[i]!;
    if (!w) continue;
    const from = rankStart[w]!;
    const n = 1 << (w - 1);
    const nb = maxBits + 1 - w;
    if (n < 16) {
      for (let k = from; k < from + n; k++) {
        symbol[k] = i;
        bits[k] = nb;
      }
    } else {
      symbol.fill(i, from, from + n);
      bits.fill(nb, from, from + n);
    }
    rankStart[w] = from + n;
  }
  return [table, at];
}

// Predefined distributions (RFC 8878 §3.1.1.3.2.2).
const LL_NORM = [4, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 2, 1, 1, 1, 1, 1, -1, -1, -1, -1];
const ML_NORM = [
  1, 4, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
  1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1,
];
const OF_NORM = [1, 1, 1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1];
const LL_DEFAULT = buildFse(Int16Array.from(LL_NORM), LL_NORM.length, 6);
const ML_DEFAULT = buildFse(Int16Array.from(ML_NORM), ML_NORM.length, 6);
const OF_DEFAULT = buildFse(Int16Array.from(OF_NORM), OF_NORM.length, 5);

// Literal and match length codes: extra bits and baselines (RFC 8878 §3.1.1.3.2.1.1).
const LL_BITS = Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
const ML_BITS = Uint8Array.from([
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 7,
  8, 9, 10, 11, 12, 13, 14, 15, 16,
]);
const baselines = (bits: Uint8Array, first: number): Uint32Array => {
  const out = new Uint32Array(bits.length);
  for (let i = 0, b = first; i < bits.length; i++) {
    out[i] = b;
    b += 1 << bits[i]!;
  }
  return out;
};
const LL_BASE = baselines(LL_BITS, 0);
const ML_BASE = baselines(ML_BITS, 3);

const MAX_BLOCK = 128 << 10;

/** The n <= 24 bits of `src` from bit `bit` on (little-endian); missing bytes read as zero. */
const bitsAt = (src: Uint8Array, bit: number, n: number): number => {
  const b = bit >> 3;
  return ((src[b]! | (src[b + 1]! << 8) | (src[b + 2]! << 16) | (src[b + 3]! << 24)) >>> (bit & 7)) & ((1 << n) - 1);
};

// ---------------------------------------------------------------- dictionaries

const DICT_MAGIC = 0xec30a437;

const u32le = (b: Uint8Array, at: number): number => (b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16) | (b[at + 3]! << 24)) >>> 0;

/**
 * Prepares a zstd dictionary once (RFC 8878 §5): its entropy tables, repeat
 * offsets and content. Bytes without the dictionary magic are a
 * raw-content dictionary, as zstd reads them. Throws `ZstdError` when the
 * entropy tables are malformed.
 */
export function prepareDictionary(bytes: Uint8Array): ZstdDictionary {
  if (bytes.length < 8 || u32le(bytes, 0) !== DICT_MAGIC) {
    return { id: 0, content: bytes, huffman: null, ll: null, of: null, ml: null, rep: [1, 4, 8] };
  }
  const id = u32le(bytes, 4);
  const end = bytes.length;
  const [huffman, a] = readHuffman(bytes, 8, end);
  const [of, b] = readFse(bytes, a, end, 31, 8);
  const [ml, c] = readFse(bytes, b, end, 52, 9);
  const [ll, d] = readFse(bytes, c, end, 35, 9);
  if (d + 12 > end) fail('truncated dictionary');
  const content = bytes.subarray(d + 12);
  const rep: [number, number, number] = [u32le(bytes, d), u32le(bytes, d + 4), u32le(bytes, d + 8)];
  for (const r of rep) if (r === 0 || r > content.length) fail('bad dictionary repeat offset');
  return { id, content, huffman, ll, of, ml, rep };
}

// ---------------------------------------------------------------- frames

const EMPTY = new Uint8Array(0);
// The tables a frame reads, one of each: decoding is synchronous, and a
// frame only ever repeats the last one of each (a dictionary's are its own).
const HUFFMAN: Huffman = { maxBits: 0, symbol: new Uint8Array(1 << 11), bits: new Uint8Array(1 << 11) };
const LL_TABLE = fseTable(1 << 9);
const OF_TABLE = fseTable(1 << 8);
const ML_TABLE = fseTable(1 << 9);
let literalsBuffer = new Uint8Array(1024);

/** Per-frame state carried from block to block. */
interface State {
  huffman: Huffman | null;
  ll: Fse | null;
  of: Fse | null;
  ml: Fse | null;
  rep: Int32Array;
  dict: Uint8Array;
}
// One, reset by each frame: decoding is synchronous.
const STATE: State = { huffman: null, ll: null, of: null, ml: null, rep: new Int32Array(3), dict: EMPTY };

/**
 * Decompresses the magicless zstd frame `src` (RFC 8878 §3.1.1 without its
 * 4-byte magic number) into `out`, which it must fill exactly, with `dict`
 * (or none). Returns the bytes written (`out.length`); throws `ZstdError`.
 */
export function decompressFrame(src: Uint8Array, out: Uint8Array, dict: ZstdDictionary | null): number {
  const len = src.length;
  if (len < 1) fail('truncated frame header');
  const fhd = src[0]!;
  if (fhd & 0x08) fail('reserved bit set');
  // spec/nwb.md §11: the frame carries no checksum. libzstd would check one;
  // refusing the flag keeps both sides accepting exactly the same bytes.
  if (fhd & 0x04) fail('content checksum flag set');
  const single = (fhd >> 5) & 1;
  const dictIdBytes = [0, 1, 2, 4][fhd & 3]!;
  const fcsFlag = fhd >> 6;
  const fcsBytes = fcsFlag === 0 ? single : 1 << fcsFlag;
  let at = 1 + (single ? 0 : 1);
  if (at + dictIdBytes + fcsBytes > len) fail('truncated frame header');
  let dictId = 0;
  for (let i = dictIdBytes - 1; i >= 0; i--) dictId = dictId * 256 + src[at + i]!;
  at += dictIdBytes;
  if (dictId !== 0 && (!dict || dict.id !== dictId)) fail('wrong dictionary');
  if (fcsBytes) {
    let size = 0;
    for (let i = fcsBytes - 1; i >= 0; i--) size = size * 256 + src[at + i]!;
    if (fcsBytes === 2) size += 256;
    if (size !== out.length) fail('wrong content size');
    at += fcsBytes;
  }
  const state = STATE;
  state.huffman = dict ? dict.huffman : null;
  state.ll = dict ? dict.ll : null;
  state.of = dict ? dict.of : null;
  state.ml = dict ? dict.ml : null;
  const rep = state.rep;
  rep[0] = dict ? dict.rep[0] : 1;
  rep[1] = dict ? dict.rep[1] : 4;
  rep[2] = dict ? dict.rep[2] : 8;
  // With a dictionary, the output is written after its content in a
  // window kept for it, so a match is one copy within one buffer whether it
  // starts in the dictionary or in the output; then copied out.
  const content = dict ? dict.content : EMPTY;
  let buf = out;
  let base = 0;
  if (content.length > 0 && out.length <= WINDOW_MAX_OUTPUT) {
    buf = windowFor(dict!, out.length);
    base = content.length;
    state.dict = EMPTY;
  } else state.dict = content;
  outEnd = base + out.length;
  let pos = base;
  for (;;) {
    if (at + 3 > len) fail('truncated block header');
    const header = src[at]! | (src[at + 1]! << 8) | (src[at + 2]! << 16);
    at += 3;
    const last = header & 1;
    const type = (header >> 1) & 3;
    const size = header >>> 3;
    if (size > MAX_BLOCK) fail('block too large');
    if (type === 0) {
      if (at + size > len) fail('truncated block');
      if (pos + size > outEnd) fail('output larger than expected');
      buf.set(src.subarray(at, at + size), pos);
      pos += size;
      at += size;
    } else if (type === 1) {
      if (at + 1 > len) fail('truncated block');
      if (pos + size > outEnd) fail('output larger than expected');
      buf.fill(src[at]!, pos, pos + size);
      pos += size;
      at += 1;
    } else if (type === 2) {
      if (at + size > len) fail('truncated block');
      pos = decompressBlock(src, at, at + size, buf, pos, state);
      at += size;
    } else fail('reserved block type');
    if (last) break;
  }
  if (at !== len) fail('bytes after the frame');
  if (pos !== outEnd) fail('output smaller than expected');
  if (buf !== out) out.set(buf.subarray(base, outEnd));
  return out.length;
}

// Where the output being written ends in its buffer (after a window's
// dictionary content, when there is one).
let outEnd = 0;
/** The largest output decoded in a dictionary's window (larger ones copy from the dictionary). */
const WINDOW_MAX_OUTPUT = 64 << 10;
const windows = new WeakMap<ZstdDictionary, Uint8Array>();

/** `dict`'s content followed by room for `size` bytes of output. */
function windowFor(dict: ZstdDictionary, size: number): Uint8Array {
  const n = dict.content.length;
  let window = windows.get(dict);
  if (!window || window.length - n < size) {
    const room = Math.min(WINDOW_MAX_OUTPUT, Math.max(size, 4096, window ? 2 * (window.length - n) : 0));
    window = new Uint8Array(n + room);
    window.set(dict.content);
    windows.set(dict, window);
  }
  return window;
}

// The sequences' backward bit stream (RFC 8878 §4.1), read by `bitsFrom`;
// set by each block before it reads it.
let stream: Uint8Array = EMPTY;

/** The n <= 24 bits of `stream` from bit `bit` on; bytes outside it read as zero. */
function bitsFrom(bit: number, n: number): number {
  const src = stream;
  const b = bit >> 3;
  return ((src[b]! | (src[b + 1]! << 8) | (src[b + 2]! << 16) | (src[b + 3]! << 24)) >>> (bit & 7)) & ((1 << n) - 1);
}

// Where `sequenceTable` reads, and where it leaves off.
let tableAt = 0;

/** A sequence table in `mode` (RFC 8878 §3.1.1.3.2.1) at `tableAt`. */
function sequenceTable(src: Uint8Array, end: number, mode: number, previous: Fse | null, predefined: Fse, maxSymbol: number, maxLog: number, scratch: Fse): Fse {
  if (mode === 0) return predefined;
  if (mode === 1) {
    if (tableAt >= end) fail('truncated sequences');
    const s = src[tableAt++]!;
    if (s > maxSymbol) fail('bad RLE symbol');
    return rleFse(s);
  }
  if (mode === 2) {
    const [fse, after] = readFse(src, tableAt, end, maxSymbol, maxLog, scratch);
    tableAt = after;
    return fse;
  }
  if (!previous) fail('no previous table');
  return previous;
}

/** One compressed block (RFC 8878 §3.1.1.3) at `src[at..end)`; returns the new output position. */
function decompressBlock(src: Uint8Array, at: number, end: number, out: Uint8Array, pos: number, st: State): number {
  // ---- literals section
  if (at >= end) fail('truncated literals');
  const b0 = src[at]!;
  const litType = b0 & 3;
  const sizeFormat = (b0 >> 2) & 3;
  let litSize: number;
  let compSize = 0;
  let streams = 1;
  if (litType < 2) {
    if ((sizeFormat & 1) === 0) {
      litSize = b0 >> 3;
      at += 1;
    } else if (sizeFormat === 1) {
      litSize = (b0 >> 4) | (src[at + 1]! << 4);
      at += 2;
    } else {
      litSize = (b0 >> 4) | (src[at + 1]! << 4) | (src[at + 2]! << 12);
      at += 3;
    }
  } else {
    if (sizeFormat < 2) {
      const v = b0 | (src[at + 1]! << 8) | (src[at + 2]! << 16);
      litSize = (v >> 4) & 0x3ff;
      compSize = (v >> 14) & 0x3ff;
      streams = sizeFormat === 0 ? 1 : 4;
      at += 3;
    } else if (sizeFormat === 2) {
      const v = u32le(src, at);
      litSize = (v >>> 4) & 0x3fff;
      compSize = (v >>> 18) & 0x3fff;
      streams = 4;
      at += 4;
    } else {
      litSize = ((b0 >> 4) | (src[at + 1]! << 4) | (src[at + 2]! << 12)) & 0x3ffff;
      compSize = (src[at + 2]! >> 6) | (src[at + 3]! << 2) | (src[at + 4]! << 10);
      streams = 4;
      at += 5;
    }
  }
  if (at > end) fail('truncated literals');
  if (litSize > MAX_BLOCK || litSize > outEnd - pos) fail('literals larger than the output');
  let lits: Uint8Array;
  let litAt = 0;
  if (litType === 0) {
    if (at + litSize > end) fail('truncated literals');
    lits = src;
    litAt = at;
    at += litSize;
  } else if (litType === 1) {
    if (at + 1 > end) fail('truncated literals');
    if (literalsBuffer.length < litSize) literalsBuffer = new Uint8Array(Math.max(litSize, 2 * literalsBuffer.length));
    lits = literalsBuffer;
    lits.fill(src[at]!, 0, litSize);
    at += 1;
  } else {
    const stop = at + compSize;
    if (stop > end) fail('truncated literals');
    if (litType === 2) {
      const [huffman, after] = readHuffman(src, at, stop, HUFFMAN);
      st.huffman = huffman;
      at = after;
    } else if (!st.huffman) fail('no previous Huffman table');
    if (literalsBuffer.length < litSize) literalsBuffer = new Uint8Array(Math.max(litSize, 2 * literalsBuffer.length));
    lits = literalsBuffer;
    const huf = st.huffman!;
    if (streams === 1) decodeHuffman(src, at, stop, lits, 0, litSize, huf);
    else {
      if (at + 6 > stop) fail('truncated literals');
      const s1 = src[at]! | (src[at + 1]! << 8);
      const s2 = src[at + 2]! | (src[at + 3]! << 8);
      const s3 = src[at + 4]! | (src[at + 5]! << 8);
      const seg = (litSize + 3) >> 2;
      if (3 * seg > litSize) fail('bad literals streams');
      const e1 = at + 6 + s1;
      const e2 = e1 + s2;
      const e3 = e2 + s3;
      if (e3 > stop) fail('truncated literals');
      decodeHuffman(src, at + 6, e1, lits, 0, seg, huf);
      decodeHuffman(src, e1, e2, lits, seg, 2 * seg, huf);
      decodeHuffman(src, e2, e3, lits, 2 * seg, 3 * seg, huf);
      decodeHuffman(src, e3, stop, lits, 3 * seg, litSize, huf);
    }
    at = stop;
  }
  const litEnd = litAt + litSize;

  // ---- sequences section
  if (at >= end) fail('truncated sequences');
  let nbSeq = src[at++]!;
  if (nbSeq >= 128) {
    if (nbSeq === 255) {
      if (at + 2 > end) fail('truncated sequences');
      nbSeq = src[at]! + (src[at + 1]! << 8) + 0x7f00;
      at += 2;
    } else {
      if (at + 1 > end) fail('truncated sequences');
      nbSeq = ((nbSeq - 128) << 8) + src[at++]!;
    }
  }
  if (nbSeq === 0) {
    if (at !== end) fail('bytes after the sequences');
    if (pos + litSize > outEnd) fail('output larger than expected');
    out.set(lits.subarray(litAt, litEnd), pos);
    return pos + litSize;
  }
  if (at >= end) fail('truncated sequences');
  const modes = src[at++]!;
  if (modes & 3) fail('reserved bits set');
  tableAt = at;
  const llt = (st.ll = sequenceTable(src, end, modes >> 6, st.ll, LL_DEFAULT, 35, 9, LL_TABLE));
  const oft = (st.of = sequenceTable(src, end, (modes >> 4) & 3, st.of, OF_DEFAULT, 31, 8, OF_TABLE));
  const mlt = (st.ml = sequenceTable(src, end, (modes >> 2) & 3, st.ml, ML_DEFAULT, 52, 9, ML_TABLE));
  at = tableAt;

  // The backward bit stream of the sequences (RFC 8878 §4.1). An overread
  // stream reads bytes before it (or none): the end check below refuses it.
  if (at >= end) fail('truncated sequences');
  const lastByte = src[end - 1]!;
  if (lastByte === 0) fail('bad sequences stream');
  let bit = end * 8 - 8 + highBit(lastByte);
  const floor = at * 8;
  stream = src;
  const llSym = llt.symbol, llNb = llt.bits, llBase = llt.base;
  const ofSym = oft.symbol, ofNb = oft.bits, ofBase = oft.base;
  const mlSym = mlt.symbol, mlNb = mlt.bits, mlBase = mlt.base;
  let lls = bitsFrom((bit -= llt.log), llt.log);
  let ofs = bitsFrom((bit -= oft.log), oft.log);
  let mls = bitsFrom((bit -= mlt.log), mlt.log);
  const dict = st.dict;
  const dictLen = dict.length;
  const rep = st.rep;
  let rep0 = rep[0]!, rep1 = rep[1]!, rep2 = rep[2]!;
  const outLen = outEnd;
  let li = litAt;
  for (let n = nbSeq; n > 0; n--) {
    const ofCode = ofSym[ofs]!;
    const mlCode = mlSym[mls]!;
    const llCode = llSym[lls]!;
    let offset: number;
    if (ofCode > 24) {
      if (ofCode > 31) fail('bad offset code');
      const hi = bitsFrom((bit -= ofCode - 24), ofCode - 24);
      offset = 2 ** ofCode + hi * (1 << 24) + bitsFrom((bit -= 24), 24);
    } else offset = (1 << ofCode) + bitsFrom((bit -= ofCode), ofCode);
    const mlExtra = ML_BITS[mlCode]!;
    const ml = ML_BASE[mlCode]! + bitsFrom((bit -= mlExtra), mlExtra);
    const llExtra = LL_BITS[llCode]!;
    const ll = LL_BASE[llCode]! + bitsFrom((bit -= llExtra), llExtra);
    if (offset > 3) {
      rep2 = rep1;
      rep1 = rep0;
      rep0 = offset -= 3;
    } else {
      const idx = ll === 0 ? offset : offset - 1;
      if (idx === 0) offset = rep0;
      else {
        offset = idx === 1 ? rep1 : idx === 2 ? rep2 : rep0 - 1;
        if (idx > 1) rep2 = rep1;
        rep1 = rep0;
        rep0 = offset;
      }
    }
    if (n > 1) {
      const a = llNb[lls]!;
      lls = llBase[lls]! + bitsFrom((bit -= a), a);
      const b = mlNb[mls]!;
      mls = mlBase[mls]! + bitsFrom((bit -= b), b);
      const c = ofNb[ofs]!;
      ofs = ofBase[ofs]! + bitsFrom((bit -= c), c);
    }
    // Execute: ll literals, then ml bytes from `offset` back.
    if (ll > litEnd - li) fail('literals overrun');
    if (pos + ll + ml > outLen) fail('output larger than expected');
    if (ll > 16) {
      out.set(lits.subarray(li, li + ll), pos);
      pos += ll;
      li += ll;
    } else for (let i = 0; i < ll; i++) out[pos++] = lits[li++]!;
    if (offset <= 0 || offset > pos + dictLen) fail('offset too far back');
    let from = pos - offset;
    let left = ml;
    if (from < 0) {
      // From the dictionary's content, then on into the output.
      let d = dictLen + from;
      const n1 = left < -from ? left : -from;
      if (n1 > 16) {
        out.set(dict.subarray(d, d + n1), pos);
        pos += n1;
      } else for (let i = 0; i < n1; i++) out[pos++] = dict[d++]!;
      left -= n1;
      from = 0;
    }
    if (left > 8 && offset >= left) {
      out.copyWithin(pos, from, from + left);
      pos += left;
    } else for (let i = 0; i < left; i++) out[pos++] = out[from++]!;
  }
  rep[0] = rep0;
  rep[1] = rep1;
  rep[2] = rep2;
  if (bit !== floor) fail('bad sequences stream');
  const rest = litEnd - li;
  if (pos + rest > outLen) fail('output larger than expected');
  if (rest > 0) out.set(lits.subarray(li, litEnd), pos);
  return pos + rest;
}

/** One Huffman stream `src[start..stop)` into `lits[from..to)` (RFC 8878 §4.2.2). */
function decodeHuffman(src: Uint8Array, start: number, stop: number, lits: Uint8Array, from: number, to: number, huf: Huffman): void {
  if (stop <= start) fail('empty Huffman stream');
  const lastByte = src[stop - 1]!;
  if (lastByte === 0) fail('bad Huffman stream');
  const maxBits = huf.maxBits;
  const mask = (1 << maxBits) - 1;
  const symbol = huf.symbol;
  const bits = huf.bits;
  const floor = start * 8;
  let bit = stop * 8 - 8 + highBit(lastByte);
  for (let i = from; i < to; i++) {
    // The next maxBits bits below `bit` (at most 11, so three bytes hold
    // them); below the stream's start they are zero (the last codes may be
    // shorter than maxBits).
    const low = bit - maxBits;
    let v: number;
    if (low >= floor) {
      const b = low >> 3;
      v = ((src[b]! | (src[b + 1]! << 8) | (src[b + 2]! << 16)) >>> (low & 7)) & mask;
    } else {
      const have = bit - floor;
      if (have <= 0) fail('Huffman stream overrun');
      const b = start;
      v = (((src[b]! | (src[b + 1]! << 8) | (src[b + 2]! << 16)) & ((1 << have) - 1)) << (maxBits - have)) & mask;
    }
    lits[i] = symbol[v]!;
    bit -= bits[v]!;
  }
  if (bit !== floor) fail('bad Huffman stream');
}
