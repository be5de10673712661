// nostrwire.v1 and v2 frames (spec/transport.md §2, §6): a type byte, then
// a body that runs to the end of the WebSocket message.

import { readUtf8, toHex, utf8 } from './bytes.js';
import { NwbError } from './errors.js';
import { DEFAULT_LIMITS, type Limits } from './limits.js';
import { decodeRecord, encodeEvent } from './record.js';
import type { Event } from './types.js';

/** The WebSocket subprotocol that selects the binary transport, version 1. */
export const SUBPROTOCOL = 'nostrwire.v1';
/** The WebSocket subprotocol of version 2: batches, records as stored. */
export const SUBPROTOCOL_V2 = 'nostrwire.v2';

export const FRAME_JSON = 0x00;
export const FRAME_EVENT = 0x01;
export const FRAME_AUTH = 0x02;
export const FRAME_RELAY_EVENT = 0x03;
export const FRAME_OK = 0x04;
export const FRAME_EOSE = 0x05;
export const FRAME_BATCH = 0x06;
export const FRAME_DICTIONARY_SET = 0x07;
export const FRAME_HOLD = 0x08;

/** Most records a batch may claim (spec/transport.md §8). */
export const MAX_BATCH_RECORDS = 4096;
/** Largest batch frame (spec/transport.md §8). */
export const MAX_BATCH_FRAME_BYTES = 2 << 20;
/** Most dictionary sets a `0x08` frame names. */
export const MAX_HELD_SETS = 8;

/** A relay → client frame, decoded. */
export type RelayFrame =
  | { type: 'json'; text: string }
  | { type: 'event'; subId: string; event: Event }
  | { type: 'ok'; id: string; accepted: boolean; message: string }
  | { type: 'eose'; subId: string }
  /**
   * v2: the stored records (views of the frame, made when first read), raw
   * (0x01) or compressed (0x81); `list` is the frame's bytes from the first
   * record's length on, `count` the number of records.
   */
  | { type: 'batch'; subId: string; readonly records: Uint8Array[]; list: Uint8Array; count: number }
  /** v2: the relay's dictionary set (SHA-256, lowercase hex), or none. */
  | { type: 'dictionary_set'; set: string | null };

/** A v2 batch frame, decoded. */
export type BatchFrame = Extract<RelayFrame, { type: 'batch' }>;

/** `0x08`: the dictionary sets (SHA-256 as lowercase hex) the client holds. */
export function holdFrame(sets: string[]): Uint8Array {
  if (sets.length > MAX_HELD_SETS) throw new NwbError('bad_dictionary_hash');
  const out = new Uint8Array(1 + 32 * sets.length);
  out[0] = FRAME_HOLD;
  sets.forEach((hex, i) => {
    if (!/^[0-9a-f]{64}$/.test(hex)) throw new NwbError('bad_dictionary_hash');
    for (let j = 0; j < 32; j++) out[1 + 32 * i + j] = parseInt(hex.slice(2 * j, 2 * j + 2), 16);
  });
  return out;
}

// Where `varint` reads, and leaves off.
let at = 0;

// A minimal LEB128 varint (spec/nwb.md §4) at `at`, which moves past it,
// ending before `end`.
function varint(bytes: Uint8Array, end = bytes.length): number {
  let value = 0;
  for (let shift = 0; ; shift += 7) {
    const pos = at;
    if (pos >= end) throw new NwbError('truncated');
    const b = bytes[pos]!;
    at = pos + 1;
    if (shift === 49 && b > 0x0f) throw new NwbError('varint_overflow');
    value += (b & 0x7f) * 2 ** shift;
    if (b < 0x80) {
      if (b === 0 && shift > 0) throw new NwbError('overlong_varint');
      return value;
    }
  }
}

/**
 * The records of a batch's body after the subscription id: the count and
 * every length are checked against the limits and the bytes left before
 * anything is allocated or looped over; a compressed record's header too
 * (its payload when it is decompressed). No view is made per record (a
 * client that decodes the batch in WebAssembly needs none): `records()`
 * makes them when asked. `checkedLater`: the records are left to the
 * WebAssembly module, which checks them the same way before anything of
 * the batch is used (`renderRecords`).
 */
function batchRecords(
  frame: Uint8Array,
  start: number,
  limits: Limits,
  checkedLater: boolean,
): { list: Uint8Array; count: number; records: () => Uint8Array[] } {
  at = start;
  const n = varint(frame);
  const listStart = at;
  if (n === 0) throw new NwbError('truncated', 'empty batch');
  // An entry takes at least 5 bytes: a length, then 0x81, D, R, one byte.
  if (n > MAX_BATCH_RECORDS || n > (frame.length - at) / 5) throw new NwbError('too_many_records');
  for (let i = 0; i < (checkedLater ? 0 : n); i++) {
    const len = varint(frame);
    if (len > limits.maxRecordBytes) throw new NwbError('record_too_large');
    const pos = at;
    if (len > frame.length - pos) throw new NwbError('truncated');
    if (len === 0) throw new NwbError('truncated');
    const first = frame[pos];
    if (first === 0x81) {
      at = pos + 1;
      const end = pos + len;
      varint(frame, end);
      if (varint(frame, end) > limits.maxRecordBytes) throw new NwbError('record_too_large');
      if (at >= end) throw new NwbError('truncated');
    } else if (first !== 0x01) {
      throw new NwbError('bad_version');
    }
    at = pos + len;
  }
  if (!checkedLater && at !== frame.length) throw new NwbError('trailing_bytes');
  let made: Uint8Array[] | null = null;
  const records = (): Uint8Array[] => {
    if (made) return made;
    made = new Array(n);
    let p = listStart;
    for (let i = 0; i < n; i++) {
      at = p;
      const len = varint(frame);
      made[i] = frame.subarray(at, at + len);
      p = at + len;
    }
    return made;
  };
  return { list: frame.subarray(listStart), count: n, records };
}

/**
 * Decodes one relay → client frame of `nostrwire.v2`: batches, the
 * relay's dictionary set, and the version 1 frames but the single EVENT.
 * Throws {@link NwbError} on bad bytes.
 */
export function decodeRelayFrameV2(frame: Uint8Array, limits: Limits = DEFAULT_LIMITS, recordsCheckedLater = false): RelayFrame {
  switch (frame[0]) {
    case FRAME_BATCH: {
      if (frame.length > MAX_BATCH_FRAME_BYTES) throw new NwbError('batch_too_large');
      if (frame.length < 2) throw new NwbError('truncated');
      const len = frame[1]!;
      if (len === 0 || len > 64) throw new NwbError('bad_subscription_id');
      if (frame.length < 2 + len) throw new NwbError('truncated');
      const subId = subscriptionId(frame, 2, 2 + len);
      const batch = batchRecords(frame, 2 + len, limits, recordsCheckedLater);
      return {
        type: 'batch',
        subId,
        list: batch.list,
        count: batch.count,
        get records() {
          return batch.records();
        },
      };
    }
    case FRAME_DICTIONARY_SET:
      if (frame.length === 1) return { type: 'dictionary_set', set: null };
      if (frame.length !== 33) throw new NwbError('bad_dictionary_hash');
      return { type: 'dictionary_set', set: toHex(frame, 1, 33) };
    case FRAME_RELAY_EVENT:
      throw new NwbError('unknown_message', 'a single EVENT on nostrwire.v2');
    default:
      return decodeRelayFrame(frame, limits);
  }
}

/** A NIP-01 message as a `0x00` frame. */
export function jsonFrame(message: unknown): Uint8Array {
  const text = utf8(JSON.stringify(message));
  const out = new Uint8Array(text.length + 1);
  out[0] = FRAME_JSON;
  out.set(text, 1);
  return out;
}

/** `EVENT` (0x01) or `AUTH` (0x02) with the event as an nwb record. */
export function eventFrame(event: Event, type: typeof FRAME_EVENT | typeof FRAME_AUTH = FRAME_EVENT): Uint8Array {
  const record = encodeEvent(event);
  const out = new Uint8Array(record.length + 1);
  out[0] = type;
  out.set(record, 1);
  return out;
}

function subscriptionId(bytes: Uint8Array, start: number, end: number): string {
  if (end <= start || end - start > 64) throw new NwbError('bad_subscription_id');
  return readUtf8(bytes, start, end);
}

/** Decodes one relay → client frame; throws {@link NwbError} on bad bytes. */
export function decodeRelayFrame(frame: Uint8Array, limits: Limits = DEFAULT_LIMITS): RelayFrame {
  if (frame.length === 0) throw new NwbError('unknown_message', 'empty frame');
  switch (frame[0]) {
    case FRAME_JSON:
      return { type: 'json', text: readUtf8(frame, 1, frame.length) };
    case FRAME_RELAY_EVENT: {
      if (frame.length < 2) throw new NwbError('truncated');
      const len = frame[1]!;
      if (len === 0 || len > 64) throw new NwbError('bad_subscription_id');
      if (frame.length < 2 + len) throw new NwbError('truncated');
      const subId = subscriptionId(frame, 2, 2 + len);
      return { type: 'event', subId, event: decodeRecord(frame.subarray(2 + len), limits) };
    }
    case FRAME_OK: {
      if (frame.length < 34) throw new NwbError('truncated');
      const flag = frame[33]!;
      if (flag > 1) throw new NwbError('non_canonical_flag');
      return { type: 'ok', id: toHex(frame, 1, 33), accepted: flag === 1, message: readUtf8(frame, 34, frame.length) };
    }
    case FRAME_EOSE:
      return { type: 'eose', subId: subscriptionId(frame, 1, frame.length) };
    default:
      throw new NwbError('unknown_message', `type byte ${frame[0]}`);
  }
}
