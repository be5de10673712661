// Canonical ids (NIP-01) and BIP-340 signature checks.
//
// Two verifiers: the package's own WebAssembly one (libsecp256k1 built
// from crates/verify-wasm, verify-wasm.ts), loaded on first use by
// `initVerifier()` or by `Relay.connect`, and @noble/curves in plain
// JavaScript, used until the WebAssembly one is ready, where it cannot be
// instantiated (for example a Content-Security-Policy without
// 'wasm-unsafe-eval'), and for the rare event the WebAssembly side does not
// serialize itself. Both are real BIP-340 implementations, and both refuse
// an id, pubkey or sig that is not exactly 64, 64 or 128 lowercase hex
// characters; nothing is ever skipped silently.

import { schnorr } from '@noble/curves/secp256k1.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { hexToBytes } from '@noble/hashes/utils.js';
import { toHex } from './bytes.js';
import { decodeRecord } from './record.js';
import type { Event, EventTemplate } from './types.js';
import type { WasmVerifier } from './verify-wasm.js';

/** Marks an event object whose verdict is known (as nostr-tools does). */
export const verifiedSymbol: unique symbol = Symbol('verified');

type Verdicts = { [verifiedSymbol]?: boolean };

const encoder = new TextEncoder();

/** The canonical serialization `[0,pubkey,created_at,kind,tags,content]`. */
export function serializeEvent(event: EventTemplate & { pubkey: string }): string {
  return JSON.stringify([0, event.pubkey, event.created_at, event.kind, event.tags, event.content]);
}

/** The event id: SHA-256 of the canonical serialization, lowercase hex. */
export function getEventHash(event: EventTemplate & { pubkey: string }): string {
  return toHex(sha256(encoder.encode(serializeEvent(event))));
}

let wasm: WasmVerifier | null = null;
let wasmLoading: Promise<boolean> | null = null;

/**
 * Loads the WebAssembly verifier. Resolves to false (and keeps the
 * JavaScript one) when WebAssembly is unavailable. Safe to call repeatedly.
 */
export function initVerifier(): Promise<boolean> {
  if (!warming) {
    warming = true;
    void loadWasm().then((ok) => {
      // In the background, in short turns: the first events then meet
      // optimized code.
      if (ok && wasm) return import('./verify-wasm.js').then((m) => m.warmUp(wasm!, yieldToEventLoop));
    }).catch(() => undefined);
  }
  return loadWasm();
}

let warming = false;

/**
 * Loads the WebAssembly module without warming its verifier up: for a
 * client that only decodes with it (nostrwire.v2 batches, verification
 * off). Resolves to false where WebAssembly cannot run.
 * @internal
 */
export function loadWasm(): Promise<boolean> {
  wasmLoading ??= import('./verify-wasm.js')
    .then(async (m) => {
      wasm = await m.loadVerifier();
      return true;
    })
    .catch(() => false);
  return wasmLoading;
}

/**
 * The loaded WebAssembly module, for decoding nostrwire.v2 batches; null
 * until it is loaded or where it cannot be.
 * @internal
 */
export function wasmModule(): WasmVerifier | null {
  return wasm;
}

/**
 * Empties the WebAssembly verifier's cache of parsed public keys. Only
 * benchmarks need it: they time each pass as a first REQ would run.
 * @internal
 */
export function clearVerifierCache(): void {
  wasm?.clearKeyCache();
}

/** Which verifier `verifyEvent` uses right now. */
export function verifierName(): 'wasm' | 'js' {
  return wasm ? 'wasm' : 'js';
}

/** True when `s` is a string of exactly `length` lowercase hex characters. */
export function isLowerHex(s: unknown, length: number): s is string {
  if (typeof s !== 'string' || s.length !== length) return false;
  for (let i = 0; i < length; i++) {
    const c = s.charCodeAt(i);
    // 0-9 or a-f
    if (!((c >= 48 && c <= 57) || (c >= 97 && c <= 102))) return false;
  }
  return true;
}

/**
 * The shape every verifier demands before any check: id, pubkey and sig
 * exactly 64, 64 and 128 lowercase hex characters. Hex decoders that read
 * what is there (or accept uppercase) would otherwise pass a cut id.
 */
function wellFormed(event: Event): boolean {
  return isLowerHex(event.id, 64) && isLowerHex(event.pubkey, 64) && isLowerHex(event.sig, 128);
}

// The JavaScript verifier: JSON.stringify's serialization, noble's BIP-340.
function checkJs(event: Event): boolean {
  if (!wellFormed(event)) return false;
  try {
    if (getEventHash(event) !== event.id) return false;
    return schnorr.verify(hexToBytes(event.sig), hexToBytes(event.id), hexToBytes(event.pubkey));
  } catch {
    return false;
  }
}

const one = new Int8Array(1);

// The WebAssembly verifier throws only when its memory cannot grow for a
// batch: those events go to the JavaScript verifier instead.
function wasmEvents(events: readonly Event[], from: number, to: number, out: Int8Array): void {
  try {
    wasm!.verifyEvents(events, from, to, out);
  } catch {
    out.fill(-1, from, to);
  }
}

function check(event: Event): boolean {
  if (!wasm) return checkJs(event);
  wasmEvents([event], 0, 1, one);
  return one[0] === -1 ? checkJs(event) : one[0] === 1;
}

/** Events per call into WebAssembly between looks at the clock. */
const CHUNK = 32;
/**
 * Fewer when they are large: about this many bytes of content and tags per
 * call, so that a run of large events cannot hold the thread for long.
 */
const CHUNK_BYTES = 256 * 1024;

// Rough size of an event's serialization, for CHUNK_BYTES (O(tags)).
function eventSize(e: Event): number {
  const content = typeof e.content === 'string' ? e.content.length : 0;
  return 300 + content + (Array.isArray(e.tags) ? 80 * e.tags.length : 0);
}

/**
 * True when the id is the canonical hash and the signature is valid for
 * the pubkey. The verdict is cached on the object, like nostr-tools'.
 */
export function verifyEvent(event: Event): boolean {
  const known = (event as Event & Verdicts)[verifiedSymbol];
  if (typeof known === 'boolean') return known;
  const ok = check(event);
  (event as Event & Verdicts)[verifiedSymbol] = ok;
  return ok;
}

/** Time one slice of batch verification may take before yielding (ms). */
export const SLICE_MS = 8;

// A macrotask without setTimeout's clamp (1 ms in Node, 4 ms in browsers
// once timers nest), which would add a millisecond or more to every slice.
type Immediate = (cb: () => void) => unknown;
const immediate = (globalThis as { setImmediate?: Immediate }).setImmediate;
let channel: MessageChannel | null = null;
const woken: (() => void)[] = [];

function nextMessage(): Promise<void> {
  if (!channel) {
    channel = new MessageChannel();
    channel.port1.onmessage = () => woken.shift()?.();
  }
  const port = channel.port2;
  return new Promise((resolve) => {
    woken.push(resolve);
    port.postMessage(null);
  });
}

/**
 * Resolves on the next macrotask, letting input and rendering run:
 * `scheduler.yield()` where there is one, else `setImmediate` (Node), else a
 * `MessageChannel` message, else `setTimeout`.
 */
export function yieldToEventLoop(): Promise<void> {
  const s = (globalThis as { scheduler?: { yield?: () => Promise<void> } }).scheduler;
  if (s?.yield) return s.yield();
  if (immediate) return new Promise((resolve) => immediate(resolve));
  if (typeof MessageChannel === 'function') return nextMessage();
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/**
 * Verifies many events without holding the thread for more than about
 * {@link SLICE_MS} at a time: results in input order, each also cached on
 * its event as `verifyEvent` does.
 */
export async function verifyEvents(events: Event[]): Promise<boolean[]> {
  await initVerifier();
  const out: boolean[] = new Array(events.length);
  const verdicts = new Int8Array(events.length);
  const size = (i: number) => eventSize(events[i]!);
  await inSlices(events.length, size, (from, to) => {
    if (wasm) wasmEvents(events, from, to, verdicts);
    else verdicts.fill(-1, from, to);
    for (let i = from; i < to; i++) {
      const e = events[i]! as Event & Verdicts;
      const known = e[verifiedSymbol];
      const ok = typeof known === 'boolean' ? known : verdicts[i] === -1 ? checkJs(e) : verdicts[i] === 1;
      e[verifiedSymbol] = ok;
      out[i] = ok;
    }
  });
  return out;
}

// Runs `chunk` over [0, count) in runs of at most CHUNK items and about
// CHUNK_BYTES (by `size`), giving the thread back once a slice has taken
// SLICE_MS.
async function inSlices(count: number, size: (i: number) => number, chunk: (from: number, to: number) => void): Promise<void> {
  let sliceStart = performance.now();
  for (let from = 0; from < count; ) {
    let to = from + 1;
    let bytes = size(from);
    while (to < count && to - from < CHUNK && bytes < CHUNK_BYTES) bytes += size(to++);
    chunk(from, to);
    from = to;
    if (performance.now() - sliceStart > SLICE_MS) {
      await yieldToEventLoop();
      sliceStart = performance.now();
    }
  }
}

/**
 * Verifies a run of events at once, synchronously: each with its nwb
 * record (`records[i]`, verified as bytes) where it has one, else as the
 * event. Calls into WebAssembly take runs of one kind, so ids are hashed
 * four at a time; verdicts go to `out` and onto each event, as
 * `verifyEvent` leaves them. Callers keep a run to {@link RUN_MAX} events
 * so that one call stays short.
 * @internal
 */
export function verifyRun(events: readonly Event[], records: readonly (Uint8Array | undefined)[], out: boolean[]): void {
  const n = events.length;
  if (runVerdicts.length < n) runVerdicts = new Int8Array(n);
  const verdicts = runVerdicts;
  for (let i = 0; i < n; ) {
    const record = records[i] !== undefined;
    let j = i + 1;
    while (j < n && (records[j] !== undefined) === record) j++;
    if (!wasm) verdicts.fill(-1, i, j);
    else if (record) wasmRecords(records as Uint8Array[], i, j, verdicts);
    else wasmEvents(events, i, j, verdicts);
    i = j;
  }
  for (let i = 0; i < n; i++) {
    const e = events[i]! as Event & Verdicts;
    const known = e[verifiedSymbol];
    const v = verdicts[i]!;
    const r = records[i];
    const ok = typeof known === 'boolean' ? known : v !== -1 ? v === 1 : r !== undefined ? checkRecordJs(r) : checkJs(e);
    e[verifiedSymbol] = ok;
    out[i] = ok;
  }
}

let runVerdicts = new Int8Array(CHUNK);

/** Events one {@link verifyRun} call should take at most. @internal */
export const RUN_MAX = CHUNK;

/**
 * True when an nwb event record (form byte 0x01, the bytes `decodeRecord`
 * takes) is well formed, its id is the canonical hash and its signature is
 * valid. A record that does not decode is false, never an exception.
 */
export function verifyRecord(record: Uint8Array): boolean {
  if (wasm) {
    wasmRecords([record], 0, 1, one);
    return one[0] === -1 ? checkRecordJs(record) : one[0] === 1;
  }
  return checkRecordJs(record);
}

// As `wasmEvents`: -1 for the records the WebAssembly verifier could not take.
function wasmRecords(records: readonly Uint8Array[], from: number, to: number, out: Int8Array): void {
  try {
    wasm!.verifyRecords(records, from, to, out);
  } catch {
    out.fill(-1, from, to);
  }
}

function checkRecordJs(record: Uint8Array): boolean {
  let event: Event;
  try {
    event = decodeRecord(record);
  } catch {
    return false;
  }
  return checkJs(event);
}

/**
 * {@link verifyRecord} for many records, in slices of about
 * {@link SLICE_MS}: verdicts in input order.
 */
export async function verifyRecords(records: Uint8Array[]): Promise<boolean[]> {
  await initVerifier();
  const out: boolean[] = new Array(records.length);
  const verdicts = new Int8Array(records.length);
  await inSlices(records.length, (i) => records[i]!.length, (from, to) => {
    if (wasm) wasmRecords(records, from, to, verdicts);
    else verdicts.fill(-1, from, to);
    for (let i = from; i < to; i++) out[i] = verdicts[i] === -1 ? checkRecordJs(records[i]!) : verdicts[i] === 1;
  });
  return out;
}

/**
 * Records in one buffer (each a u32 LE length, then its bytes), as the
 * verifier pool posts them to a worker: one transferable copy, whatever
 * buffers the records are views of.
 */
export function packRecords(records: Uint8Array[]): Uint8Array {
  let size = 0;
  for (const r of records) size += 4 + r.length;
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  let at = 0;
  for (const r of records) {
    view.setUint32(at, r.length, true);
    out.set(r, at + 4);
    at += 4 + r.length;
  }
  return out;
}

/** The records of a {@link packRecords} buffer, as views of it. */
export function unpackRecords(packed: Uint8Array): Uint8Array[] {
  const view = new DataView(packed.buffer, packed.byteOffset, packed.byteLength);
  const out: Uint8Array[] = [];
  let at = 0;
  while (at < packed.length) {
    if (packed.length - at < 4) throw new RangeError('packed records: truncated length');
    const len = view.getUint32(at, true);
    if (len > packed.length - at - 4) throw new RangeError('packed records: truncated record');
    out.push(packed.subarray(at + 4, at + 4 + len));
    at += 4 + len;
  }
  return out;
}
