// nwb event records (spec/nwb.md §3, §5–§8), stream framing (§10) and
// compressed records (§11).

import {
  Reader,
  Writer,
  fixedHex,
  isHexCompactable,
  readUtf8,
  typeError,
  toHex,
  utf8,
} from './bytes.js';
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

/** Decodes an uncompressed event record (form byte 0x01). */
export function decodeRecord(bytes: Uint8Array, limits: Limits = DEFAULT_LIMITS): Event {
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
    tags = readTags(r, blockEnd, limits);
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

function readTags(r: Reader, end: number, limits: Limits): string[][] {
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
      const name = readElement(r, end, limits);
      if (hasShortForm(name)) throw new NwbError('non_canonical_name');
      tag[i++] = name;
    }
    for (; i < elements; i++) tag[i] = readElement(r, end, limits);
    tags[t] = tag;
  }
  if (r.pos !== end) throw new NwbError('tag_block_mismatch');
  return tags;
}

function readElement(r: Reader, end: number, limits: Limits): string {
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
  if (bytes.length === 0) throw new NwbError('truncated');
  if (bytes[0] !== COMPRESSED_V1) throw new NwbError('bad_version');
  const r = new Reader(bytes, 1);
  const dict = r.varint();
  const size = r.varint();
  if (size > limits.maxRecordBytes) throw new NwbError('record_too_large');
  if (!decoder) {
    throw new NwbError(dict ? 'unknown_dictionary' : 'decompress', 'no zstd decoder: useZstd() with one from nostrwire/zstd');
  }
  const out = new Uint8Array(size);
  let written: number;
  try {
    written = decoder(bytes.subarray(r.pos), out, dict);
  } catch (e) {
    // By kind, not class: the decoder may come from another copy of the package.
    throw new NwbError((e as NwbError | null)?.kind === 'unknown_dictionary' ? 'unknown_dictionary' : 'decompress', `dictionary ${dict}`);
  }
  if (written !== size) throw new NwbError('decompress', 'wrong decompressed size');
  if (out[0] !== EVENT_V1) throw new NwbError('bad_version', 'envelopes do not nest');
  return out;
}
