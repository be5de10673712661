// nwb event records (spec/nwb.md §3, §5–§8), stream framing (§10) and
// compressed records (§11).

import { Reader, Writer, fixedHex, isHexCompactable, readUtf8, typeError, toHex, utf8, varintAt, varintEnd } from './bytes.js';
import { NwbError } from './errors.js';
import { DEFAULT_LIMITS, type Limits } from './limits.js';
import type { Event } from './types.js';

/** Form byte of an event record, format version 1 (§2). */
export const EVENT_V1 = 0x01;
/** Form byte of a compressed record, envelope version 1 (§11). */
export const COMPRESSED_V1 = 0x81;
/** Length of the fixed prefix (§3). */
export const PREFIX_LEN = 139;

const OFF_KIND = 1;
const OFF_CREATED_AT = 3;
const OFF_PUBKEY = 11;
const OFF_ID = 43;
const OFF_SIG = 75;
const MAX_TIMESTAMP = 2 ** 53 - 1;

// ---------------------------------------------------------------- encoding

/**
 * The one canonical record of `event` (§8). Throws {@link NwbError} when the
 * object is not a well-formed event (wrong types, bad hex, out-of-range
 * numbers, empty tags, lone surrogates). Ids and signatures are copied, not
 * checked: use `verifyEvent` for that.
 */
export function encodeEvent(event: Event): Uint8Array {
  const w = new Writer(512);
  writeEvent(w, event);
  return w.finish();
}

/** A stream of frames (§10), as `nostrwire convert --to nwb` writes it. */
export function encodeEvents(events: Iterable<Event>): Uint8Array {
  const w = new Writer(4096);
  for (const event of events) {
    const record = encodeEvent(event);
    w.varint(record.length);
    w.bytes(record);
  }
  return w.finish();
}

function writeEvent(w: Writer, event: Event): void {
  if (typeof event !== 'object' || event === null || Array.isArray(event)) throw new NwbError('wrong_type', 'event is not an object');
  const { kind, created_at: createdAt, tags, content } = event;
  if (!Number.isInteger(kind)) throw typeError(kind, 'kind', 'an integer');
  if (kind < 0 || kind > 0xffff) throw new NwbError('kind_out_of_range');
  if (!Number.isInteger(createdAt)) throw typeError(createdAt, 'created_at', 'an integer');
  if (createdAt < 0) throw new NwbError('negative_number', 'created_at');
  if (createdAt > MAX_TIMESTAMP) throw new NwbError('timestamp_out_of_range');
  const pubkey = fixedHex(event.pubkey, 32, 'pubkey');
  const id = fixedHex(event.id, 32, 'id');
  const sig = fixedHex(event.sig, 64, 'sig');
  if (!Array.isArray(tags)) throw typeError(tags, 'tags', 'an array');
  if (typeof content !== 'string') throw typeError(content, 'content', 'a string');

  w.reserve(PREFIX_LEN);
  const b = w.buf;
  let at = w.len;
  b[at] = EVENT_V1;
  b[at + OFF_KIND] = kind & 0xff;
  b[at + OFF_KIND + 1] = kind >>> 8;
  // created_at as u64 LE: low 32 bits, then the high 21.
  const lo = createdAt % 2 ** 32;
  const hi = (createdAt - lo) / 2 ** 32;
  const dv = new DataView(b.buffer, b.byteOffset);
  dv.setUint32(at + OFF_CREATED_AT, lo, true);
  dv.setUint32(at + OFF_CREATED_AT + 4, hi, true);
  w.len = at + OFF_PUBKEY;
  w.hex(pubkey);
  w.hex(id);
  w.hex(sig);

  const block = new Writer(64 + tags.length * 40);
  block.varint(tags.length);
  for (const tag of tags) writeTag(block, tag);
  w.varint(block.len);
  w.bytes(block.buf.subarray(0, block.len));

  const text = utf8(content);
  w.varint(text.length);
  w.bytes(text);
}

function writeTag(w: Writer, tag: unknown): void {
  if (!Array.isArray(tag)) throw typeError(tag, 'tag', 'an array');
  if (tag.length === 0) throw new NwbError('empty_tag');
  const name = tag[0];
  if (typeof name !== 'string') throw elementError(name);
  const short = hasShortForm(name);
  w.varint(tag.length * 2 + (short ? 1 : 0));
  if (short) w.byte(name.charCodeAt(0));
  else writeElement(w, name);
  for (let i = 1; i < tag.length; i++) {
    const value = tag[i];
    if (typeof value !== 'string') throw elementError(value);
    writeElement(w, value);
  }
}

// §5: a one-byte name (one ASCII character) takes the short form, and only
// it. A hex element is never one character, so the decoder can ask this of
// whatever the long form held.
function hasShortForm(name: string): boolean {
  return name.length === 1 && name.charCodeAt(0) < 0x80;
}

function elementError(value: unknown): NwbError {
  return value === null ? new NwbError('null', 'tag element') : new NwbError('non_string_tag_element');
}

function writeElement(w: Writer, value: string): void {
  if (isHexCompactable(value)) {
    const n = value.length >> 1;
    w.varint(n === 32 ? 1 : n * 2 + 1);
    w.hex(value);
  } else {
    const text = utf8(value);
    w.varint(text.length * 2);
    w.bytes(text);
  }
}

// ---------------------------------------------------------------- decoding

/**
 * Decodes one record: an event record (§3) or a compressed record (§11).
 * Throws {@link NwbError} for anything but exactly one canonical record.
 */
export function decodeEvent(bytes: Uint8Array, limits: Limits = DEFAULT_LIMITS): Event {
  if (bytes.length > limits.maxRecordBytes) throw new NwbError('record_too_large');
  if (bytes[0] === COMPRESSED_V1) return decodeRecord(decompressRecord(bytes, limits), limits);
  return decodeRecord(bytes, limits);
}

/** Decodes a stream of frames (§10); the stream must end between frames. */
export function decodeEvents(bytes: Uint8Array, limits: Limits = DEFAULT_LIMITS): Event[] {
  const out: Event[] = [];
  const r = new Reader(bytes);
  while (r.pos < bytes.length) {
    const len = r.varint();
    if (len > limits.maxRecordBytes) throw new NwbError('record_too_large');
    if (len > bytes.length - r.pos) throw new NwbError('truncated', 'the stream ends inside a frame');
    out.push(decodeEvent(bytes.subarray(r.pos, r.pos + len), limits));
    r.pos += len;
  }
  return out;
}

// The fast decoder. Its strings but the content come from one TextDecoder
// call, whose cost per call was most of decoding: the hex digits of pubkey,
// id and sig, then each hex element and each text element in record order,
// are written to `scratch` and decoded at once, and every field is a slice
// of the result (its offsets are byte offsets while everything is ASCII).
// A record that fails, or whose text elements are not all ASCII, is decoded
// again by `decodeRecordEager`, which reports errors in record order and
// decodes strings one by one. Decoding is synchronous: one scratch serves
// every call.
const HEX_HI = new Uint8Array(256);
const HEX_LO = new Uint8Array(256);
const IS_HEX_DIGIT = new Uint8Array(256);
for (let i = 0; i < 256; i++) {
  const digits = i.toString(16).padStart(2, '0');
  HEX_HI[i] = digits.charCodeAt(0);
  HEX_LO[i] = digits.charCodeAt(1);
}
for (const c of '0123456789abcdef') IS_HEX_DIGIT[c.charCodeAt(0)] = 1;
const SCRATCH_KEPT = 1 << 16;
let scratchKept = new Uint8Array(4096);
let scratch = scratchKept;
let filled = 0;
// Per deferred element: tag, element, start and end in `scratch`.
let slots = new Int32Array(256);
let slotCount = 0;
let at = 0;
const fatalUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
// What the fast decoder throws where the error's kind is left to the eager one.
const AGAIN = new Error('decode again in order');

function hexInto(bytes: Uint8Array, from: number, to: number): void {
  const out = scratch;
  let j = filled;
  for (let i = from; i < to; i++) {
    const b = bytes[i]!;
    out[j++] = HEX_HI[b]!;
    out[j++] = HEX_LO[b]!;
  }
  filled = j;
}

function defer(tag: number, element: number, start: number): void {
  if (slotCount + 4 > slots.length) {
    const grown = new Int32Array(slots.length * 2);
    grown.set(slots);
    slots = grown;
  }
  slots[slotCount++] = tag;
  slots[slotCount++] = element;
  slots[slotCount++] = start;
  slots[slotCount++] = filled;
}

// The varint at `at`, before `end`; `at` moves past it.
function varint(bytes: Uint8Array, end: number): number {
  const value = varintAt(bytes, at, end);
  at = varintEnd;
  return value;
}

/** Decodes an uncompressed event record (form byte 0x01). */
export function decodeRecord(bytes: Uint8Array, limits: Limits = DEFAULT_LIMITS): Event {
  try {
    const event = decodeRecordFast(bytes, limits);
    if (event) return event;
  } catch {
    // The reference decoder says which error comes first.
  }
  return decodeRecordEager(bytes, limits);
}

// The event, or null when a text element is not ASCII; throws on bad bytes
// (not necessarily the first error).
function decodeRecordFast(bytes: Uint8Array, limits: Limits): Event | null {
  const len = bytes.length;
  if (len > limits.maxRecordBytes || len < PREFIX_LEN || bytes[0] !== EVENT_V1) return decodeRecordEager(bytes, limits);
  const hi = bytes[OFF_CREATED_AT + 4]! | (bytes[OFF_CREATED_AT + 5]! << 8) | (bytes[OFF_CREATED_AT + 6]! << 16) | (bytes[OFF_CREATED_AT + 7]! << 24);
  if (hi < 0 || hi > 0x1fffff) throw new NwbError('timestamp_out_of_range');
  const lo = (bytes[OFF_CREATED_AT]! | (bytes[OFF_CREATED_AT + 1]! << 8) | (bytes[OFF_CREATED_AT + 2]! << 16) | (bytes[OFF_CREATED_AT + 3]! << 24)) >>> 0;
  const createdAt = hi * 2 ** 32 + lo;
  const kind = bytes[OFF_KIND]! | (bytes[OFF_KIND + 1]! << 8);

  // Hex doubles its bytes; text is copied once.
  const need = 2 * len;
  if (need > scratchKept.length && need <= SCRATCH_KEPT) scratchKept = new Uint8Array(Math.max(need, 2 * scratchKept.length));
  scratch = need <= scratchKept.length ? scratchKept : new Uint8Array(need);
  filled = 0;
  slotCount = 0;
  // pubkey, id and sig lie side by side from OFF_PUBKEY on.
  hexInto(bytes, OFF_PUBKEY, PREFIX_LEN);

  at = PREFIX_LEN;
  const blockLen = varint(bytes, len);
  if (blockLen > len - at) throw new NwbError('truncated');
  const tags = readTags(bytes, at + blockLen, limits);

  const contentLen = varint(bytes, len);
  if (contentLen > limits.maxStringBytes) throw new NwbError('string_too_large');
  if (contentLen !== len - at) throw new NwbError('trailing_bytes');
  const content = readUtf8(bytes, at, len);
  const text = fatalUtf8.decode(scratch.subarray(0, filled));
  // Fewer characters than bytes: some text element is not ASCII.
  if (text.length !== filled) return null;
  for (let k = 0; k < slotCount; k += 4) tags[slots[k]!]![slots[k + 1]!] = text.slice(slots[k + 2]!, slots[k + 3]!);

  return {
    id: text.slice(64, 128),
    pubkey: text.slice(0, 64),
    created_at: createdAt,
    kind,
    tags,
    content,
    sig: text.slice(128, 256),
  };
}

function readTags(bytes: Uint8Array, end: number, limits: Limits): string[][] {
  const count = varint(bytes, end);
  if (count > limits.maxTags) throw new NwbError('too_many_tags');
  if (count > (end - at) / 2) throw new NwbError('tag_block_mismatch');
  const tags: string[][] = new Array(count);
  for (let t = 0; t < count; t++) {
    const header = varint(bytes, end);
    const elements = Math.floor(header / 2);
    if (elements === 0 || elements > limits.maxTagElements || elements > end - at) throw AGAIN;
    const tag: string[] = new Array(elements);
    tags[t] = tag;
    let i = 0;
    if (header % 2 === 1) {
      if (at >= end) throw new NwbError('truncated');
      const name = bytes[at++]!;
      if (name >= 0x80) throw new NwbError('invalid_utf8');
      tag[i++] = String.fromCharCode(name);
    } else {
      // A long-form name of one character had the short form (§5) if ASCII.
      const start = filled;
      readElement(bytes, end, limits, t, i++);
      if (filled - start === 1) throw new NwbError('non_canonical_name');
    }
    for (; i < elements; i++) readElement(bytes, end, limits, t, i);
  }
  if (at !== end) throw new NwbError('tag_block_mismatch');
  return tags;
}

// Element `i` of tag `t`, hex or text, to the scratch.
function readElement(bytes: Uint8Array, end: number, limits: Limits, t: number, i: number): void {
  const header = varint(bytes, end);
  const len = Math.floor(header / 2);
  const start = at;
  const from = filled;
  if (header % 2 === 1) {
    if (len === 32) throw new NwbError('non_canonical_hex');
    const n = len === 0 ? 32 : len;
    if (n > limits.maxStringBytes / 2 || n > end - at) throw AGAIN;
    at += n;
    hexInto(bytes, start, start + n);
  } else {
    if (len > limits.maxStringBytes || len > end - at) throw AGAIN;
    at += len;
    // Hex digits only, of even length, had the hex form (§6): most text
    // fails on its first character.
    if (len > 0 && len % 2 === 0 && IS_HEX_DIGIT[bytes[start]!] === 1) {
      let k = start + 1;
      while (k < at && IS_HEX_DIGIT[bytes[k]!] === 1) k++;
      if (k === at) throw new NwbError('non_canonical_hex');
    }
    if (len <= 16) {
      const out = scratch;
      for (let k = start; k < at; k++) out[filled++] = bytes[k]!;
    } else {
      scratch.set(bytes.subarray(start, at), filled);
      filled += len;
    }
  }
  defer(t, i, from);
}

// The reference decoder: each string decoded where it is met, so the first
// error in record order is the one reported. `decodeRecord` falls back to
// it for a record that fails, or whose text elements are not all ASCII.
function decodeRecordEager(bytes: Uint8Array, limits: Limits = DEFAULT_LIMITS): Event {
  const len = bytes.length;
  if (len > limits.maxRecordBytes) throw new NwbError('record_too_large');
  if (len === 0) throw new NwbError('truncated');
  if (bytes[0] !== EVENT_V1) throw new NwbError('bad_version');
  if (len < PREFIX_LEN) throw new NwbError('truncated');
  const dv = new DataView(bytes.buffer, bytes.byteOffset, len);
  const hi = dv.getUint32(OFF_CREATED_AT + 4, true);
  if (hi > 0x1fffff) throw new NwbError('timestamp_out_of_range');
  const createdAt = hi * 2 ** 32 + dv.getUint32(OFF_CREATED_AT, true);
  const kind = dv.getUint16(OFF_KIND, true);

  const r = new Reader(bytes, PREFIX_LEN);
  const blockLen = r.varint();
  if (blockLen > len - r.pos) throw new NwbError('truncated');
  const blockEnd = r.pos + blockLen;
  let tags: string[][];
  try {
    tags = readTagsEager(r, blockEnd, limits);
  } catch (e) {
    // Inside the tag block, running out of bytes means the block is too short.
    if (e instanceof NwbError && e.kind === 'truncated') throw new NwbError('tag_block_mismatch');
    throw e;
  }

  const contentLen = r.varint();
  if (contentLen > limits.maxStringBytes) throw new NwbError('string_too_large');
  const rest = len - r.pos;
  if (contentLen > rest) throw new NwbError('truncated');
  if (contentLen < rest) throw new NwbError('trailing_bytes');
  const content = readUtf8(bytes, r.pos, len);

  return {
    id: toHex(bytes, OFF_ID, OFF_ID + 32),
    pubkey: toHex(bytes, OFF_PUBKEY, OFF_PUBKEY + 32),
    created_at: createdAt,
    kind,
    tags,
    content,
    sig: toHex(bytes, OFF_SIG, OFF_SIG + 64),
  };
}

function readTagsEager(r: Reader, end: number, limits: Limits): string[][] {
  const bytes = r.bytes;
  const count = r.varint(end);
  if (count > limits.maxTags) throw new NwbError('too_many_tags');
  if (count > (end - r.pos) / 2) throw new NwbError('tag_block_mismatch');
  const tags: string[][] = new Array(count);
  for (let t = 0; t < count; t++) {
    const header = r.varint(end);
    const elements = Math.floor(header / 2);
    if (elements === 0) throw new NwbError('empty_tag');
    if (elements > limits.maxTagElements) throw new NwbError('too_many_tag_elements');
    if (elements > end - r.pos) throw new NwbError('truncated');
    const tag: string[] = new Array(elements);
    let i = 0;
    if (header % 2 === 1) {
      if (r.pos >= end) throw new NwbError('truncated');
      const name = bytes[r.pos++]!;
      if (name >= 0x80) throw new NwbError('invalid_utf8');
      tag[i++] = String.fromCharCode(name);
    } else {
      const name = readElementEager(r, end, limits);
      if (hasShortForm(name)) throw new NwbError('non_canonical_name');
      tag[i++] = name;
    }
    for (; i < elements; i++) tag[i] = readElementEager(r, end, limits);
    tags[t] = tag;
  }
  if (r.pos !== end) throw new NwbError('tag_block_mismatch');
  return tags;
}

function readElementEager(r: Reader, end: number, limits: Limits): string {
  const header = r.varint(end);
  const len = Math.floor(header / 2);
  const available = end - r.pos;
  const start = r.pos;
  if (header % 2 === 1) {
    if (len === 32) throw new NwbError('non_canonical_hex', '32 hex bytes in the general form');
    const n = len === 0 ? 32 : len;
    if (n > limits.maxStringBytes / 2) throw new NwbError('string_too_large');
    if (n > available) throw new NwbError('truncated');
    r.pos += n;
    return toHex(r.bytes, start, start + n);
  }
  if (len > limits.maxStringBytes) throw new NwbError('string_too_large');
  if (len > available) throw new NwbError('truncated');
  const text = readUtf8(r.bytes, start, start + len);
  if (isHexCompactable(text)) throw new NwbError('non_canonical_hex');
  r.pos += len;
  return text;
}

// ---------------------------------------------------------------- compressed

/**
 * A zstd decoder for compressed records: decompresses `payload`, a
 * magicless zstd frame (§11), with dictionary `dictionary` of the reader's
 * set (0 = none) into `out`, which holds exactly the `R` bytes the record
 * header names, and returns the bytes written. It throws {@link NwbError}
 * `unknown_dictionary` for an id it lacks; anything else it throws counts
 * as `decompress`. `nostrwire/zstd` has two: `zstdDecoder` and
 * `zstdDecoderWithDictionaries(setFile)`; the `Relay` client uses them
 * for `nostrwire.v2` connections, whatever `useZstd` was given.
 */
export type ZstdDecoder = (payload: Uint8Array, out: Uint8Array, dictionary: number) => number;

let zstd: ZstdDecoder | null = null;

/** Lets `decodeEvent` read compressed records (§11); `null` turns it off. */
export function useZstd(decoder: ZstdDecoder | null): void {
  zstd = decoder;
}

/**
 * The event record inside a compressed record (§11), decompressed with
 * `decoder` (default: the one set with `useZstd`).
 */
export function decompressRecord(
  bytes: Uint8Array,
  limits: Limits = DEFAULT_LIMITS,
  decoder: ZstdDecoder | null = zstd,
): Uint8Array {
  return decompressInto(bytes, limits, decoder, null);
}

/**
 * The size a compressed record names for its event record (its `R`),
 * checked against `limits.maxRecordBytes` before anyone allocates it.
 * @internal
 */
export function decompressedSize(bytes: Uint8Array, limits: Limits = DEFAULT_LIMITS): number {
  if (bytes.length === 0) throw new NwbError('truncated');
  if (bytes[0] !== COMPRESSED_V1) throw new NwbError('bad_version');
  at = 1;
  varint(bytes, bytes.length);
  const size = varint(bytes, bytes.length);
  if (size > limits.maxRecordBytes) throw new NwbError('record_too_large');
  return size;
}

/**
 * {@link decompressRecord} into `out` (exactly the record's `R` bytes, from
 * {@link decompressedSize}), or into a new array when `out` is null: a
 * caller with many records gives them one buffer.
 * @internal
 */
export function decompressInto(
  bytes: Uint8Array,
  limits: Limits,
  decoder: ZstdDecoder | null,
  out: Uint8Array | null,
): Uint8Array {
  const size = decompressedSize(bytes, limits);
  at = 1;
  const dict = varint(bytes, bytes.length);
  varint(bytes, bytes.length);
  const payload = bytes.subarray(at);
  if (!decoder) {
    throw new NwbError(dict ? 'unknown_dictionary' : 'decompress', 'no zstd decoder: useZstd() with one from nostrwire/zstd');
  }
  if (out === null) out = new Uint8Array(size);
  else if (out.length !== size) throw new RangeError('the output must hold exactly the decompressed size');
  let written: number;
  try {
    written = decoder(payload, out, dict);
  } catch (e) {
    // By kind, not class: the decoder may come from another copy of the package.
    throw new NwbError((e as NwbError | null)?.kind === 'unknown_dictionary' ? 'unknown_dictionary' : 'decompress', `dictionary ${dict}`);
  }
  if (written !== size) throw new NwbError('decompress', 'wrong decompressed size');
  if (out[0] !== EVENT_V1) throw new NwbError('bad_version', 'envelopes do not nest');
  return out;
}
