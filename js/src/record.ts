// nwb event records (spec/nwb.md §3, §5–§8), stream framing (§10) and
// compressed records (§11).

import { Reader, Writer, fixedHex, isHexCompactable, readUtf8, typeError, utf8 } from './bytes.js';
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

// One record's strings come from one TextDecoder call, whose cost per call
// (about a microsecond in a browser) was most of decoding: the hex digits
// of pubkey, id and sig, then each hex element and each ASCII text element
// in record order, then the content are written to `scratch` and decoded
// at once, and every field is a slice of the result (all but the content
// are ASCII, so their character offsets are their byte offsets). A text
// element that is not ASCII is decoded where it is met, so errors still
// come in record order. Decoding is synchronous: one scratch serves all.
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

// A minimal LEB128 varint (§4) at `at`, before `end`.
function varintAt(bytes: Uint8Array, end: number): number {
  let i = at;
  if (i >= end) throw new NwbError('truncated');
  let b = bytes[i++]!;
  if (b < 0x80) {
    at = i;
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
      at = i;
      return value;
    }
    scale *= 128;
  }
}

/** Decodes an uncompressed event record (form byte 0x01). */
export function decodeRecord(bytes: Uint8Array, limits: Limits = DEFAULT_LIMITS): Event {
  const len = bytes.length;
  if (len > limits.maxRecordBytes) throw new NwbError('record_too_large');
  if (len === 0) throw new NwbError('truncated');
  if (bytes[0] !== EVENT_V1) throw new NwbError('bad_version');
  if (len < PREFIX_LEN) throw new NwbError('truncated');
  const hi = bytes[OFF_CREATED_AT + 4]! | (bytes[OFF_CREATED_AT + 5]! << 8) | (bytes[OFF_CREATED_AT + 6]! << 16) | (bytes[OFF_CREATED_AT + 7]! << 24);
  if (hi < 0 || hi > 0x1fffff) throw new NwbError('timestamp_out_of_range');
  const lo = (bytes[OFF_CREATED_AT]! | (bytes[OFF_CREATED_AT + 1]! << 8) | (bytes[OFF_CREATED_AT + 2]! << 16) | (bytes[OFF_CREATED_AT + 3]! << 24)) >>> 0;
  const createdAt = hi * 2 ** 32 + lo;
  const kind = bytes[OFF_KIND]! | (bytes[OFF_KIND + 1]! << 8);

  // Hex doubles its bytes; everything else is copied at most once.
  const need = 2 * len + 256;
  if (need > scratchKept.length && need <= SCRATCH_KEPT) scratchKept = new Uint8Array(Math.max(need, 2 * scratchKept.length));
  scratch = need <= scratchKept.length ? scratchKept : new Uint8Array(need);
  filled = 0;
  slotCount = 0;
  // pubkey, id and sig lie side by side from OFF_PUBKEY on.
  hexInto(bytes, OFF_PUBKEY, PREFIX_LEN);

  at = PREFIX_LEN;
  const blockLen = varintAt(bytes, len);
  if (blockLen > len - at) throw new NwbError('truncated');
  const blockEnd = at + blockLen;
  let tags: string[][];
  try {
    tags = readTags(bytes, blockEnd, limits);
  } catch (e) {
    // Inside the tag block, running out of bytes means the block is too short.
    if (e instanceof NwbError && e.kind === 'truncated') throw new NwbError('tag_block_mismatch');
    throw e;
  }

  const contentLen = varintAt(bytes, len);
  if (contentLen > limits.maxStringBytes) throw new NwbError('string_too_large');
  const rest = len - at;
  if (contentLen > rest) throw new NwbError('truncated');
  if (contentLen < rest) throw new NwbError('trailing_bytes');
  const ascii = filled;
  scratch.set(bytes.subarray(at, len), ascii);
  let text: string;
  try {
    text = fatalUtf8.decode(scratch.subarray(0, ascii + contentLen));
  } catch {
    throw new NwbError('invalid_utf8');
  }
  for (let k = 0; k < slotCount; k += 4) tags[slots[k]!]![slots[k + 1]!] = text.slice(slots[k + 2]!, slots[k + 3]!);

  return {
    id: text.slice(64, 128),
    pubkey: text.slice(0, 64),
    created_at: createdAt,
    kind,
    tags,
    content: text.slice(ascii),
    sig: text.slice(128, 256),
  };
}

function readTags(bytes: Uint8Array, end: number, limits: Limits): string[][] {
  const count = varintAt(bytes, end);
  if (count > limits.maxTags) throw new NwbError('too_many_tags');
  if (count > (end - at) / 2) throw new NwbError('tag_block_mismatch');
  const tags: string[][] = new Array(count);
  for (let t = 0; t < count; t++) {
    const header = varintAt(bytes, end);
    const elements = Math.floor(header / 2);
    if (elements === 0) throw new NwbError('empty_tag');
    if (elements > limits.maxTagElements) throw new NwbError('too_many_tag_elements');
    if (elements > end - at) throw new NwbError('truncated');
    const tag: string[] = new Array(elements);
    tags[t] = tag;
    let i = 0;
    if (header % 2 === 1) {
      if (at >= end) throw new NwbError('truncated');
      const name = bytes[at++]!;
      if (name >= 0x80) throw new NwbError('invalid_utf8');
      tag[i++] = String.fromCharCode(name);
    } else {
      // A long-form name of one ASCII character had a short form (§5).
      const start = filled;
      const name = readElement(bytes, end, limits, tag, t, 0);
      if (name === null ? filled - start === 1 : hasShortForm(name)) throw new NwbError('non_canonical_name');
      i++;
    }
    for (; i < elements; i++) readElement(bytes, end, limits, tag, t, i);
  }
  if (at !== end) throw new NwbError('tag_block_mismatch');
  return tags;
}

// Element `i` of tag `t`: hex and ASCII text go to the scratch (and come
// back `null`), other text is decoded here.
function readElement(bytes: Uint8Array, end: number, limits: Limits, tag: string[], t: number, i: number): string | null {
  const header = varintAt(bytes, end);
  const len = Math.floor(header / 2);
  const available = end - at;
  const start = at;
  if (header % 2 === 1) {
    if (len === 32) throw new NwbError('non_canonical_hex', '32 hex bytes in the general form');
    const n = len === 0 ? 32 : len;
    if (n > limits.maxStringBytes / 2) throw new NwbError('string_too_large');
    if (n > available) throw new NwbError('truncated');
    at += n;
    const from = filled;
    hexInto(bytes, start, start + n);
    defer(t, i, from);
    return null;
  }
  if (len > limits.maxStringBytes) throw new NwbError('string_too_large');
  if (len > available) throw new NwbError('truncated');
  at += len;
  // Copied while it is ASCII; hex digits only, of even length, had the hex form (§6).
  const out = scratch;
  const from = filled;
  let j = from;
  let hexDigits = 1;
  for (let k = start; k < start + len; k++) {
    const c = bytes[k]!;
    if (c >= 0x80) {
      const text = readUtf8(bytes, start, start + len);
      tag[i] = text;
      return text;
    }
    hexDigits &= IS_HEX_DIGIT[c]!;
    out[j++] = c;
  }
  if (hexDigits === 1 && len > 0 && len % 2 === 0) throw new NwbError('non_canonical_hex');
  filled = j;
  defer(t, i, from);
  return null;
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
  varintAt(bytes, bytes.length);
  const size = varintAt(bytes, bytes.length);
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
  const dict = varintAt(bytes, bytes.length);
  varintAt(bytes, bytes.length);
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
