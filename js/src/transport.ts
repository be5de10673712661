// nostrwire.v1 frames (spec/transport.md §2): a type byte, then a body that
// runs to the end of the WebSocket message.

import { readUtf8, toHex, utf8 } from './bytes.js';
import { NwbError } from './errors.js';
import { DEFAULT_LIMITS, type Limits } from './limits.js';
import { decodeRecord, encodeEvent } from './record.js';
import type { Event } from './types.js';

/** The WebSocket subprotocol that selects the binary transport. */
export const SUBPROTOCOL = 'nostrwire.v1';

export const FRAME_JSON = 0x00;
export const FRAME_EVENT = 0x01;
export const FRAME_AUTH = 0x02;
export const FRAME_RELAY_EVENT = 0x03;
export const FRAME_OK = 0x04;
export const FRAME_EOSE = 0x05;

/** A relay → client frame, decoded. */
export type RelayFrame =
  | { type: 'json'; text: string }
  | { type: 'event'; subId: string; event: Event }
  | { type: 'ok'; id: string; accepted: boolean; message: string }
  | { type: 'eose'; subId: string };

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
