// Byte helpers shared by the codec and the transport: a growable writer,
// minimal LEB128 varints (spec/nwb.md §4), hex and UTF-8.

import { NwbError } from './errors.js';

const HEX: string[] = [];
const UNHEX = new Int16Array(128).fill(-1);
for (let i = 0; i < 256; i++) HEX.push(i.toString(16).padStart(2, '0'));
for (let i = 0; i < 16; i++) {
  UNHEX['0123456789abcdef'.charCodeAt(i)] = i;
}

// The two ASCII hex digits of every byte, written to a scratch buffer and
// turned into a string by one TextDecoder call (ASCII has a fast path):
// much cheaper than concatenating two-character strings.
const HEX_ASCII = new Uint16Array(256);
for (let i = 0; i < 256; i++) {
  // Little-endian pair: the high digit at the lower address.
  HEX_ASCII[i] = HEX[i]!.charCodeAt(0) | (HEX[i]!.charCodeAt(1) << 8);
}
const CHUNK = 8192;
const scratch16 = new Uint16Array(CHUNK);
const scratch8 = new Uint8Array(scratch16.buffer);
const ascii = new TextDecoder();
const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Lowercase hex of `bytes[start..end]`. */
export function toHex(bytes: Uint8Array, start = 0, end = bytes.length): string {
  if (!littleEndian) {
    let s = '';
    for (let i = start; i < end; i++) s += HEX[bytes[i]!];
    return s;
  }
  let out = '';
  for (let at = start; at < end; at += CHUNK) {
    const stop = Math.min(end, at + CHUNK);
    let j = 0;
    for (let i = at; i < stop; i++) scratch16[j++] = HEX_ASCII[bytes[i]!]!;
    out += ascii.decode(scratch8.subarray(0, 2 * j));
  }
  return out;
}

/**
 * The hex compaction rule of spec/nwb.md §6: non-empty, even length, only
 * `0-9a-f`.
 */
export function isHexCompactable(s: string): boolean {
  const n = s.length;
  if (n === 0 || (n & 1) !== 0) return false;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c >= 128 || UNHEX[c]! < 0) return false;
  }
  return true;
}

/** Writes the bytes of a compactable hex string (checked by the caller). */
export function writeHex(out: Uint8Array, at: number, s: string): void {
  for (let i = 0; i < s.length; i += 2) {
    out[at++] = (UNHEX[s.charCodeAt(i)]! << 4) | UNHEX[s.charCodeAt(i + 1)]!;
  }
}

/** Bytes of a fixed-width lowercase hex field (id, pubkey, sig). */
export function fixedHex(s: unknown, bytes: number, field: string): string {
  if (typeof s !== 'string') throw typeError(s, field, 'a string');
  if (s.length !== bytes * 2) throw new NwbError('hex_length', `${field} is not ${bytes * 2} hex digits`);
  if (!isHexCompactable(s)) throw new NwbError('invalid_hex', `${field} is not lowercase hex`);
  return s;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

export function utf8(s: string): Uint8Array {
  if (!s.isWellFormed()) throw new NwbError('lone_surrogate', 'a string holds a lone surrogate');
  return encoder.encode(s);
}

/** UTF-8 of `bytes[start..end]`; short ASCII runs skip TextDecoder's call cost. */
export function readUtf8(bytes: Uint8Array, start: number, end: number): string {
  if (end - start <= 64) {
    for (let i = start; i < end; i++) {
      if (bytes[i]! >= 0x80) return decodeSlow(bytes, start, end);
    }
    return String.fromCharCode.apply(null, bytes.subarray(start, end) as unknown as number[]);
  }
  return decodeSlow(bytes, start, end);
}

function decodeSlow(bytes: Uint8Array, start: number, end: number): string {
  try {
    return decoder.decode(bytes.subarray(start, end));
  } catch {
    throw new NwbError('invalid_utf8');
  }
}

export function varintLen(value: number): number {
  let n = 1;
  while (value >= 0x80) {
    value = Math.floor(value / 128);
    n++;
  }
  return n;
}

/** A cursor over input bytes. */
export class Reader {
  pos: number;
  constructor(
    readonly bytes: Uint8Array,
    pos = 0,
  ) {
    this.pos = pos;
  }

  /**
   * A minimal LEB128 varint. Values above 2^53 come back rounded, which is
   * harmless: every caller compares them against limits far below that.
   */
  varint(end = this.bytes.length): number {
    const value = varintAt(this.bytes, this.pos, end);
    this.pos = varintEnd;
    return value;
  }
}

/** Where the varint {@link varintAt} read last ends. */
export let varintEnd = 0;

/**
 * The minimal LEB128 varint (spec/nwb.md §4) at `bytes[at]`, before `end`,
 * without a {@link Reader}; {@link varintEnd} says where it ends.
 */
export function varintAt(bytes: Uint8Array, at: number, end: number): number {
  let i = at;
  if (i >= end) throw new NwbError('truncated');
  let b = bytes[i++]!;
  if (b < 0x80) {
    varintEnd = i;
    return b;
  }
  let value = b & 0x7f;
  let scale = 128;
  for (let n = 1; ; n++) {
    if (i >= end) throw new NwbError('truncated');
    b = bytes[i++]!;
    if (n === 9 && b > 1) throw new NwbError('varint_overflow');
    value += (b & 0x7f) * scale;
    if (b < 0x80) {
      if (b === 0) throw new NwbError('overlong_varint');
      varintEnd = i;
      return value;
    }
    scale *= 128;
  }
}

/** A growable output buffer. */
export class Writer {
  buf: Uint8Array;
  len = 0;
  constructor(capacity = 256) {
    this.buf = new Uint8Array(capacity);
  }

  reserve(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let cap = this.buf.length * 2;
    while (cap < this.len + n) cap *= 2;
    const next = new Uint8Array(cap);
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
  }

  byte(b: number): void {
    this.reserve(1);
    this.buf[this.len++] = b;
  }

  varint(value: number): void {
    this.reserve(10);
    while (value >= 0x80) {
      this.buf[this.len++] = (value % 128) | 0x80;
      value = Math.floor(value / 128);
    }
    this.buf[this.len++] = value;
  }

  bytes(b: Uint8Array): void {
    this.reserve(b.length);
    this.buf.set(b, this.len);
    this.len += b.length;
  }

  hex(s: string): void {
    this.reserve(s.length >> 1);
    writeHex(this.buf, this.len, s);
    this.len += s.length >> 1;
  }

  finish(): Uint8Array {
    return this.buf.slice(0, this.len);
  }
}

/** The error for a field of the wrong type, named as the JSON event layer names it. */
export function typeError(value: unknown, field: string, expected: string): NwbError {
  if (value === undefined) return new NwbError('missing_field', field);
  if (value === null) return new NwbError('null', field);
  return new NwbError('wrong_type', `${field} is not ${expected}`);
}
