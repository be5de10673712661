// A Relay client with nostr-tools' names and meanings (`Relay.connect`,
// `subscribe`, `publish`, `count`, `auth`, `close`), speaking nostrwire.v2
// or v1 when the relay answers with one and NIP-01 JSON otherwise.

import { heldDictionarySet, dictionarySet, type SetFetchLimits } from './dictionaries.js';
import { NwbError } from './errors.js';
import { DEFAULT_LIMITS, type Limits } from './limits.js';
import { decodeRecord, decompressInto, decompressedSize, type ZstdDecoder } from './record.js';
import {
  FRAME_AUTH,
  FRAME_BATCH,
  FRAME_EVENT,
  SUBPROTOCOL,
  SUBPROTOCOL_V2,
  decodeRelayFrame,
  type BatchFrame,
  decodeRelayFrameV2,
  eventFrame,
  holdFrame,
  jsonFrame,
} from './transport.js';
import { dictionarySetFile, zstdDecoder } from './zstd.js';
import type { Event, EventTemplate, Filter } from './types.js';
import type { WasmVerifier } from './verify-wasm.js';
import { matchFilters } from './filter.js';
import { VerifierPool } from './pool.js';
import {
  SLICE_MS,
  initVerifier,
  isLowerHex,
  loadWasm,
  RUN_MAX,
  verifiedSymbol,
  verifyEvent as defaultVerify,
  verifyRecord,
  verifyRun,
  wasmModule,
  yieldToEventLoop,
} from './verify.js';

/**
 * `auto` offers nostrwire.v2, then v1, and falls back to JSON; `binary`
 * takes either version and never JSON; `v1`, `v2` and `json` insist.
 */
export type Transport = 'auto' | 'json' | 'binary' | 'v1' | 'v2';

type WebSocketLike = {
  readonly protocol: string;
  binaryType: string;
  onopen: ((ev: unknown) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  onclose: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  send(data: string | Uint8Array): void;
  close(): void;
};
type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocketLike;

let WebSocketImpl: WebSocketConstructor | undefined =
  typeof WebSocket !== 'undefined' ? (WebSocket as unknown as WebSocketConstructor) : undefined;

/** Where there is no global WebSocket (Node 20): pass `ws`'s class here. */
export function useWebSocketImplementation(impl: unknown): void {
  WebSocketImpl = impl as WebSocketConstructor;
}

export interface RelayOptions {
  /** Default `auto`. */
  transport?: Transport;
  /**
   * Verifies each event before `onevent`; `false` opts out. Default: the
   * package's `verifyEvent` (WebAssembly libsecp256k1 once loaded).
   */
  verifyEvent?: ((event: Event) => boolean) | false;
  /**
   * Web Workers that verify events off the main thread (browsers; ignored
   * where there is no `Worker`, or with a `verifyEvent` of your own).
   * Default 0: verification runs on the main thread in slices.
   */
  workers?: number;
  /** Where the bundled `verify-worker.js` is; default: beside this module. */
  workerUrl?: URL | string;
  /** Decoding limits for binary frames (spec/nwb.md §9). */
  limits?: Limits;
  /**
   * nostrwire.v2: milliseconds a fetch of the relay's dictionary set may
   * take, from the request to its last byte; records arrive uncompressed
   * meanwhile, and after a failure. Default 30,000.
   */
  dictionarySetTimeout?: number;
  /** nostrwire.v2: the largest dictionary set file fetched, in bytes. Default 16 MiB. */
  maxDictionarySetBytes?: number;
  /** Milliseconds to wait for the WebSocket to open. Default 4400. */
  connectionTimeout?: number;
  websocketImplementation?: unknown;
  /**
   * After a connection drops (not after `close()`), connects again after
   * `resubscribeBackoff`'s delays and sends each open subscription's REQ
   * again, with `since` just after the newest event it delivered; no
   * `onclose` fires meanwhile. Default false.
   */
  enableReconnect?: boolean;
  /**
   * Every `pingFrequency` milliseconds while connected, asks the relay a
   * REQ nothing matches; with no EOSE or CLOSED within `pingTimeout`, the
   * connection counts as dropped (and `enableReconnect` connects again).
   * Default false.
   */
  enablePing?: boolean;
  /**
   * Verifier workers shared with other relays (a pool's): used instead of
   * `workers`, and left running by `close()`.
   */
  verifierPool?: VerifierPool;
}

/**
 * Why an event the relay sent never reached `onevent`: its id or signature
 * does not verify (`invalid`), or it matches none of the subscription's
 * filters (`unmatched`).
 */
export type DropReason = 'invalid' | 'unmatched';

export interface SubscriptionParams {
  onevent?: (event: Event) => void;
  /**
   * Called, in order with `onevent`, with each event dropped because it
   * does not verify or does not match the subscription's filters; the
   * subscription's `dropped` counts them whether this is set or not.
   */
  oninvalidevent?: (event: Event, reason: DropReason) => void;
  oneose?: () => void;
  onclose?: (reason: string) => void;
  /**
   * Asked first, with the id of each event the relay sends: events for which
   * it returns true are dropped before any matching or verification.
   */
  alreadyHaveEvent?: (id: string) => boolean;
  /**
   * For pools: true for an id already handed on or being verified. A JSON
   * `EVENT` whose id (read from the raw text, before any parsing) it knows
   * is dropped unparsed, after `alreadyHaveEvent` is told its id; anything
   * else is parsed and checked as usual.
   */
  knownEvent?: (id: string) => boolean;
  id?: string;
  /** Names the subscription `label:N` where no `id` is given. */
  label?: string;
}

type BatchInProgress = {
  sub: Subscription;
  frame: BatchFrame;
  /** The records decoded by the WebAssembly module; null where the JavaScript decoder takes one. */
  events: (Event | null)[] | null;
  /** With the package's verifier: each decoded event's record (decompressed). */
  records: (Uint8Array | null)[] | null;
  next: number;
  keep: boolean;
  buffer: Uint8Array | null;
  used: number;
};
// The WebAssembly module checks records against the default limits only.
function defaultLimits(l: Limits): boolean {
  return (
    l === DEFAULT_LIMITS ||
    (l.maxRecordBytes === DEFAULT_LIMITS.maxRecordBytes &&
      l.maxTags === DEFAULT_LIMITS.maxTags &&
      l.maxTagElements === DEFAULT_LIMITS.maxTagElements &&
      l.maxStringBytes === DEFAULT_LIMITS.maxStringBytes)
  );
}

// The verifier checks a record against the default limits, as the record
// decoder does by default: a record that other limits let through (more
// tags, say) is verified as its event instead when a limit is above its
// default.
function withinDefaults(l: Limits): boolean {
  return (
    l.maxRecordBytes <= DEFAULT_LIMITS.maxRecordBytes &&
    l.maxTags <= DEFAULT_LIMITS.maxTags &&
    l.maxTagElements <= DEFAULT_LIMITS.maxTagElements &&
    l.maxStringBytes <= DEFAULT_LIMITS.maxStringBytes
  );
}

type Pending<T> = { resolve: (v: T) => void; reject: (e: Error) => void; timer: ReturnType<typeof setTimeout> };
const BATCH = 64;
// The most event bytes one run of main-thread verification takes.
const RUN_BYTES = 256 * 1024;
const TIMED_OUT = new Error('connection timed out');
// nostrwire.v2 batches: the most decompressed bytes one buffer holds, and
// the largest record decompressed into the shared scratch (unverified).
const BATCH_BUFFER_MAX = 4 << 20;
const SCRATCH_MAX = 64 << 10;
let scratch = new Uint8Array(4096);

// `record`: the event's uncompressed nwb record (nostrwire.v2), verified as
// bytes.
// `verdict`: the workers' answer to come; `ok`: the verdict, once known.
// `text`: the JSON message it came in, for verifier workers.
type EventItem = { sub: Subscription; event: Event; record?: Uint8Array; text?: string; matches: boolean; verdict?: Promise<boolean>; ok?: boolean };
type Item =
  | EventItem
  | { sub: Subscription; eose: true }
  | { sub: Subscription; closed: string };

export class Relay {
  readonly url: string;
  /** The transport in use once connected: `nostrwire.v2`, v1, or NIP-01 JSON. */
  transport: 'json' | 'v1' | 'v2' | null = null;
  /**
   * nostrwire.v2: the relay's dictionary set (SHA-256, hex) once it named
   * one, `null` when it has none; `held` is true once this client holds it
   * and the relay sends records compressed with it.
   */
  dictionarySet: { hash: string | null; held: boolean } | null = null;
  onclose: (() => void) | null = null;
  onnotice: (message: string) => void = () => {};
  /** NIP-42: when set, answers each AUTH challenge with an event it signs. */
  onauth: ((template: EventTemplate) => Promise<Event>) | undefined;
  publishTimeout = 4400;
  /** With `enableReconnect`: milliseconds before each attempt, the last repeated. */
  resubscribeBackoff = [10_000, 10_000, 10_000, 20_000, 20_000, 30_000, 60_000];
  connectionTimeout: number;
  readonly openSubs = new Map<string, Subscription>();

  private ws: WebSocketLike | null = null;
  private readonly wanted: Transport;
  private readonly verify: ((event: Event) => boolean) | false;
  private readonly limits: Limits;
  // The package's verifier takes this client's records as bytes.
  private readonly recordsVerified: boolean;
  private readonly Impl: WebSocketConstructor | undefined;
  private readonly setLimits: SetFetchLimits;
  private challenge: string | undefined;
  private serial = 0;
  // Per event id, the calls waiting for an OK in the order the EVENTs were
  // sent: the relay answers each EVENT, so each OK settles the oldest call.
  private readonly publishes = new Map<string, Pending<string>[]>();
  private readonly counts = new Map<string, Pending<{ count: number; hll?: string }>>();
  private queue: Item[] = [];
  private head = 0;
  private draining = false;
  private connecting: Promise<void> | null = null;
  private pool: VerifierPool | null = null;
  private batch: EventItem[] = [];
  // nostrwire.v2: what compressed records are read with (no dictionary
  // until the relay's set is held), and the first set frame's handling,
  // which `connect` waits for.
  private decoder: ZstdDecoder = zstdDecoder;
  // What the socket delivered and `pump` has not handled yet, and the batch
  // whose records it is decoding.
  private inbound: unknown[] = [];
  private inboundHead = 0;
  private pumping = false;
  private batchInProgress: BatchInProgress | null = null;
  // While the pump queues a run of a batch's events: they drain together.
  private holdDrain = false;
  private firstSet: Promise<void> | null = null;
  private named: (() => void) | null = null;
  private readonly sharedPool: boolean;
  private readonly reconnects: boolean;
  private reconnectAttempts = 0;
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly pings: boolean;
  private pingTimer: ReturnType<typeof setTimeout> | undefined;
  /** With `enablePing`: milliseconds between pings (read before each). */
  pingFrequency = 29_000;
  /** With `enablePing`: milliseconds a ping's answer may take. */
  pingTimeout = 20_000;

  constructor(url: string, opts: RelayOptions = {}) {
    this.url = url;
    this.wanted = opts.transport ?? 'auto';
    this.verify = opts.verifyEvent === undefined ? defaultVerify : opts.verifyEvent;
    this.limits = opts.limits ?? DEFAULT_LIMITS;
    this.recordsVerified = this.verify === defaultVerify && withinDefaults(this.limits);
    this.connectionTimeout = opts.connectionTimeout ?? 4400;
    this.setLimits = { timeout: opts.dictionarySetTimeout, maxBytes: opts.maxDictionarySetBytes };
    this.Impl = opts.websocketImplementation as WebSocketConstructor | undefined;
    const workers = opts.workers ?? 0;
    this.reconnects = opts.enableReconnect ?? false;
    this.pings = opts.enablePing ?? false;
    this.sharedPool = opts.verifierPool !== undefined;
    if (opts.verifierPool && this.verify === defaultVerify) this.pool = opts.verifierPool;
    else if (workers > 0 && this.verify === defaultVerify && typeof Worker !== 'undefined') {
      this.pool = new VerifierPool(workers, opts.workerUrl ?? new URL('./verify-worker.js', import.meta.url));
    }
  }

  static async connect(url: string, opts: RelayOptions = {}): Promise<Relay> {
    const relay = new Relay(url, opts);
    await relay.connect();
    return relay;
  }

  /**
   * Why the verifier workers (`workers: N`) stopped, or `null`: they could
   * not load or crashed, and events are verified on the main thread since.
   */
  get workerFailure(): Error | null {
    return this.pool?.failure ?? null;
  }

  get connected(): boolean {
    return this.ws !== null && this.transport !== null;
  }

  /** The AUTH challenge the relay sent last (NIP-42). */
  get authChallenge(): string | undefined {
    return this.challenge;
  }

  connect(): Promise<void> {
    // The WebAssembly module verifies, and decodes nostrwire.v2 batches.
    if (this.verify === defaultVerify) void initVerifier();
    else if (this.wanted !== 'json' && this.wanted !== 'v1' && defaultLimits(this.limits)) void loadWasm();
    this.connecting ??= (async () => {
      if (this.wanted !== 'json') {
        const offer =
          this.wanted === 'v1' ? [SUBPROTOCOL] : this.wanted === 'v2' ? [SUBPROTOCOL_V2] : [SUBPROTOCOL_V2, SUBPROTOCOL];
        try {
          await this.open(offer);
        } catch (e) {
          // A relay without the binary transport omits the header, and
          // browsers and `ws` then fail the handshake: try again with JSON.
          // One that did not answer in time is not waited for twice.
          if (this.wanted !== 'auto' || e === TIMED_OUT) throw e;
        }
      }
      if (!this.ws) await this.open(undefined);
      // The relay names its dictionary set first; a set this page holds
      // already is taken up before any request goes out.
      if (this.transport === 'v2') await this.firstSet;
    })().catch((e: unknown) => {
      // A failed attempt is not remembered: the next `connect` tries again.
      this.connecting = null;
      throw e;
    });
    return this.connecting;
  }

  private open(protocols: string[] | undefined): Promise<WebSocketLike> {
    const Impl = this.Impl ?? WebSocketImpl;
    if (!Impl) throw new Error('no WebSocket implementation: call useWebSocketImplementation()');
    return new Promise((resolve, reject) => {
      const ws = protocols ? new Impl(this.url, protocols) : new Impl(this.url);
      ws.binaryType = 'arraybuffer';
      const timer = setTimeout(() => {
        ws.onopen = ws.onerror = ws.onclose = null;
        ws.close();
        reject(TIMED_OUT);
      }, this.connectionTimeout);
      ws.onopen = () => {
        clearTimeout(timer);
        // Listen at once: the relay may send (an AUTH challenge) right away.
        this.ws = ws;
        this.transport = ws.protocol === SUBPROTOCOL_V2 ? 'v2' : ws.protocol === SUBPROTOCOL ? 'v1' : 'json';
        if (this.transport === 'v2') {
          this.firstSet = new Promise((named) => {
            this.named = named;
            // A relay that never names it is not waited for.
            setTimeout(named, this.connectionTimeout);
          });
        }
        this.listen(ws);
        if (this.pings) this.ping(ws);
        resolve(ws);
      };
      ws.onerror = ws.onclose = () => {
        clearTimeout(timer);
        ws.onopen = ws.onerror = ws.onclose = null;
        reject(new Error(`connection to ${this.url} failed`));
      };
    });
  }

  private listen(ws: WebSocketLike): void {
    ws.onerror = null;
    ws.onclose = () => this.dropped();
    ws.onmessage = (ev) => {
      this.inbound.push(ev.data);
      if (!this.pumping) void this.pump(ws);
    };
  }

  // Handles what arrived, in order, without holding the thread for more
  // than about SLICE_MS: a batch's records are decoded one by one, and
  // messages that come meanwhile wait behind it (a 64 KiB batch can take
  // tens of milliseconds on a page that has not compiled its decoder yet).
  private async pump(ws: WebSocketLike): Promise<void> {
    this.pumping = true;
    try {
      let sliceStart = performance.now();
      while (this.ws === ws) {
        const batch = this.batchInProgress;
        if (batch) {
          // Events the module decoded are cheap to hand on: a few dozen per
          // turn of this loop (queued, then delivered by one drain), one
          // record at a time otherwise.
          const until = batch.events ? Math.min(batch.next + 32, batch.frame.count) : batch.next + 1;
          this.holdDrain = true;
          while (batch.next < until) {
            try {
              this.decodeNext(batch);
            } catch (e) {
              // A callback of the caller's (`alreadyHaveEvent`) threw: report
              // it as an event handler's error is reported, and go on.
              setTimeout(() => {
                throw e;
              });
            }
          }
          this.holdDrain = false;
          if (!this.draining && this.head < this.queue.length) void this.drain();
          if (batch.next === batch.frame.count) this.batchInProgress = null;
        } else {
          if (this.inboundHead === this.inbound.length) {
            // Nothing more has come: the events waiting for a worker go
            // now, not when 64 have gathered or the drain reaches them.
            this.flush();
            break;
          }
          const data = this.inbound[this.inboundHead]!;
          // Batches wait for the WebAssembly module while it loads (it
          // decodes them far faster than the JavaScript decoder on a fresh
          // page); other frames do not, so `connect` never waits for it.
          // Where it cannot load, this resolves at once.
          if (
            this.transport === 'v2' &&
            typeof data !== 'string' &&
            (data as ArrayBuffer).byteLength > 0 &&
            new Uint8Array(data as ArrayBuffer, 0, 1)[0] === FRAME_BATCH &&
            !wasmModule() &&
            defaultLimits(this.limits)
          ) {
            await loadWasm();
            if (this.ws !== ws) break;
          }
          this.inbound[this.inboundHead++] = undefined;
          try {
            if (typeof data === 'string') this.onJson(data);
            else this.onBinary(new Uint8Array(data as ArrayBuffer));
          } catch (e) {
            // Hostile or broken input: drop the message, keep the connection.
            this.onnotice(`invalid: ${e instanceof NwbError ? e.kind : 'bad message'}`);
          }
        }
        if (performance.now() - sliceStart > SLICE_MS) {
          await yieldToEventLoop();
          sliceStart = performance.now();
        }
      }
    } finally {
      if (this.ws === ws) {
        this.inbound = [];
        this.inboundHead = 0;
      }
      this.pumping = false;
    }
    // A message that came while this pump was ending, for a new connection.
    if (this.ws && this.inboundHead < this.inbound.length) void this.pump(this.ws);
  }

  private onBinary(bytes: Uint8Array): void {
    const frame =
      this.transport === 'v2' ? decodeRelayFrameV2(bytes, this.limits, this.rendersBatches() !== null) : decodeRelayFrame(bytes, this.limits);
    switch (frame.type) {
      case 'batch': {
        const sub = this.openSubs.get(frame.subId);
        if (sub) this.onBatch(sub, frame);
        return;
      }
      case 'dictionary_set':
        return this.onDictionarySet(frame.set);
      case 'json':
        return this.onJson(frame.text);
      case 'event': {
        const sub = this.openSubs.get(frame.subId);
        if (sub) this.enqueueEvent(sub, frame.event);
        return;
      }
      case 'eose': {
        const sub = this.openSubs.get(frame.subId);
        if (sub) this.eoseArrived(sub);
        return;
      }
      case 'ok':
        return this.onOk(frame.id, frame.accepted, frame.message);
    }
  }

  // The WebAssembly module checks and decodes a whole batch in one call and
  // JSON.parse builds its events: far cheaper than decoding record by
  // record on a page that has not compiled the decoder yet. For the
  // package's verifier it hands back the records too, as bytes.
  private rendersBatches(): WasmVerifier | null {
    return defaultLimits(this.limits) ? wasmModule() : null;
  }

  // A batch is decoded by the module when it can (above); its events, and
  // the records it leaves, are then handed on by `pump`. Otherwise its
  // records are decoded in order by `pump`, one `decodeNext` at a time:
  // records that will be verified as bytes are decompressed into one
  // buffer per batch (one allocation, not one per record); without
  // verification the bytes are not kept, and a scratch buffer serves every
  // record.
  private onBatch(sub: Subscription, frame: BatchFrame): void {
    const keep = this.recordsVerified;
    const wasm = this.rendersBatches();
    if (wasm) {
      const set = this.decoder ? dictionarySetFile(this.decoder) : null;
      const { events, records } = wasm.renderRecords(frame.list, frame.count, set, keep);
      this.batchInProgress = { sub, frame, events, records, next: 0, keep, buffer: null, used: 0 };
      return;
    }
    let buffer: Uint8Array | null = null;
    if (keep) {
      let total = 0;
      for (const stored of frame.records) {
        if (stored[0] !== 0x81) continue;
        try {
          total += decompressedSize(stored, this.limits);
        } catch {
          // Reported where the record comes.
        }
      }
      // A batch that claims more than this (a decompression bomb's claims
      // add up) gets an array per record, each checked as it comes.
      if (total > 0 && total <= BATCH_BUFFER_MAX) buffer = new Uint8Array(total);
    }
    this.batchInProgress = { sub, frame, events: null, records: null, next: 0, keep, buffer, used: 0 };
  }

  // The next record of `batch`: decompressed when compressed, decoded
  // once; one that does not read is reported and skipped.
  private decodeNext(batch: BatchInProgress): void {
    const decoded = batch.events?.[batch.next];
    if (decoded) {
      const record = batch.records?.[batch.next] ?? undefined;
      batch.next++;
      return this.enqueueEvent(batch.sub, decoded, record);
    }
    const stored = batch.frame.records[batch.next++]!;
    let record: Uint8Array;
    let event: Event;
    try {
      if (stored[0] === 0x81) {
        const size = decompressedSize(stored, this.limits);
        const buffer = batch.buffer;
        let out: Uint8Array | null = null;
        if (buffer && batch.used + size <= buffer.length) out = buffer.subarray(batch.used, (batch.used += size));
        else if (!batch.keep && size <= SCRATCH_MAX) {
          if (scratch.length < size) scratch = new Uint8Array(Math.max(size, 2 * scratch.length));
          out = scratch.subarray(0, size);
        }
        record = decompressInto(stored, this.limits, this.decoder, out);
      } else record = stored;
      event = decodeRecord(record, this.limits);
    } catch (e) {
      this.onnotice(`invalid: ${e instanceof NwbError ? e.kind : 'bad record'}`);
      return;
    }
    this.enqueueEvent(batch.sub, event, batch.keep ? record : undefined);
  }

  // The relay's set: taken up from this page's cache at once, else fetched
  // in the background (records come uncompressed meanwhile); held (0x08)
  // once it is ready.
  private onDictionarySet(hash: string | null): void {
    const ws = this.ws;
    this.dictionarySet = { hash, held: false };
    const named = this.named;
    this.named = null;
    if (hash === null) {
      this.decoder = zstdDecoder;
      named?.();
      return;
    }
    const hold = (decoder: ZstdDecoder) => {
      if (this.ws !== ws || this.dictionarySet?.hash !== hash) return;
      this.decoder = decoder;
      this.dictionarySet = { hash, held: true };
      ws!.send(holdFrame([hash]));
      // The WebAssembly module prepares the set's dictionaries now, as the
      // JavaScript decoder did when it read the set, not on the first batch.
      const file = dictionarySetFile(decoder);
      if (file && defaultLimits(this.limits)) {
        void loadWasm().then(() => wasmModule()?.holdDictionarySet(file));
      }
    };
    const failed = (e: unknown) =>
      this.onnotice(`dictionary set ${hash} unavailable (${e instanceof Error ? e.message : e}); records arrive uncompressed`);
    void heldDictionarySet(this.url, hash)
      .then((decoder) => {
        if (decoder) hold(decoder);
        else void dictionarySet(this.url, hash, this.setLimits).then(hold, failed);
      }, failed)
      .finally(() => named?.());
  }

  // A JSON EVENT whose id the subscription's pool already took: dropped
  // before it is parsed. The id is read from the raw text; only a known id
  // skips the parse, so a relay whose text misleads the reading can lose
  // only its own message, never hide another relay's copy.
  private knownJsonEvent(text: string): boolean {
    const end = text.indexOf('"', 10);
    if (end < 0) return false;
    const sub = this.openSubs.get(text.slice(10, end));
    if (!sub?.knownEvent || text.charCodeAt(end - 1) === 92) return false;
    const at = text.indexOf('"id":"', end);
    if (at < 0 || text.charCodeAt(at + 70) !== 34) return false;
    const id = text.slice(at + 6, at + 70);
    if (!isLowerHex(id, 64) || !sub.knownEvent(id)) return false;
    if (!sub.closed) sub.alreadyHaveEvent?.(id);
    return true;
  }

  private onJson(text: string): void {
    if (text.startsWith('["EVENT","') && this.knownJsonEvent(text)) return;
    const msg: unknown = JSON.parse(text);
    if (!Array.isArray(msg) || typeof msg[0] !== 'string') return;
    switch (msg[0]) {
      case 'EVENT': {
        const sub = this.openSubs.get(msg[1]);
        if (sub && typeof msg[2] === 'object' && msg[2] !== null) this.enqueueEvent(sub, msg[2] as Event, undefined, this.pool ? text : undefined);
        return;
      }
      case 'EOSE': {
        const sub = this.openSubs.get(msg[1]);
        if (sub) this.eoseArrived(sub);
        return;
      }
      case 'CLOSED': {
        const sub = this.openSubs.get(msg[1]);
        if (sub) this.enqueue({ sub, closed: String(msg[2] ?? '') });
        // A refused COUNT (NIP-45) is answered with CLOSED too.
        const count = this.counts.get(msg[1]);
        if (count) {
          this.counts.delete(msg[1]);
          clearTimeout(count.timer);
          count.reject(new Error(String(msg[2] ?? '')));
        }
        return;
      }
      case 'OK':
        return this.onOk(String(msg[1]), msg[2] === true, String(msg[3] ?? ''));
      case 'COUNT': {
        const pending = this.counts.get(msg[1]);
        if (pending) {
          this.counts.delete(msg[1]);
          clearTimeout(pending.timer);
          const hll = msg[2]?.hll;
          pending.resolve(typeof hll === 'string' ? { count: Number(msg[2]?.count ?? 0), hll } : { count: Number(msg[2]?.count ?? 0) });
        }
        return;
      }
      case 'NOTICE':
        return this.onnotice(String(msg[1]));
      case 'AUTH':
        if (typeof msg[1] !== 'string') return;
        this.challenge = msg[1];
        if (this.onauth) this.auth(this.onauth).catch(() => {});
        return;
    }
  }

  private onOk(id: string, accepted: boolean, message: string): void {
    const waiting = this.publishes.get(id);
    const pending = waiting?.shift();
    if (!pending) return;
    if (waiting!.length === 0) this.publishes.delete(id);
    clearTimeout(pending.timer);
    if (accepted) pending.resolve(message);
    else pending.reject(new Error(message));
  }

  // An event for `sub`: what the app already has is dropped here, before a
  // worker could be given it to verify; one that matches none of the
  // filters is never verified and is reported in order when delivered.
  private enqueueEvent(sub: Subscription, event: Event, record?: Uint8Array, text?: string): void {
    if (sub.closed || sub.alreadyHaveEvent?.(event.id)) return;
    const item: EventItem = { sub, event, record, text, matches: matchFilters(sub.filters, event) };
    this.queue.push(item);
    if (this.pool && item.matches) {
      this.batch.push(item);
      if (this.batch.length >= BATCH) this.flush();
    }
    if (!this.draining && !this.holdDrain) void this.drain();
  }

  // EOSE is delivered after the events before it, which may still be
  // verified; `eoseArrived` says the relay sent it.
  private eoseArrived(sub: Subscription): void {
    sub.eoseArrived = true;
    this.enqueue({ sub, eose: true });
  }

  // Subscription messages go through one queue, so that verification can
  // run in slices and EOSE and CLOSED still come after the events before them.
  private enqueue(item: Item): void {
    this.queue.push(item);
    if (!this.draining) void this.drain();
  }

  // Sends the events waiting for a worker as one batch.
  private flush(): void {
    const items = this.batch;
    if (items.length === 0 || !this.pool) return;
    this.batch = [];
    // Records (nostrwire.v2 batches) go to the workers as bytes, JSON
    // events as the messages they came in, others as objects: one
    // connection can mix them, so each kind is sent on its own.
    const records = items.filter((i) => i.record);
    const texts = items.filter((i) => !i.record && i.text !== undefined);
    if (records.length > 0) this.awaitVerdicts(records, this.pool.verifyRecords(records.map((i) => i.record!), this));
    if (texts.length > 0) this.awaitVerdicts(texts, this.pool.verifyMessages(texts.map((i) => i.text!), this));
    if (records.length + texts.length < items.length) {
      const events = items.filter((i) => !i.record && i.text === undefined);
      this.awaitVerdicts(events, this.pool.verify(events.map((i) => i.event), this));
    }
  }

  private awaitVerdicts(items: EventItem[], verdicts: Promise<boolean[]>): void {
    items.forEach((item, k) => {
      item.verdict = verdicts.then((v) => v[k] === true);
    });
  }

  private async drain(): Promise<void> {
    this.draining = true;
    try {
      if (this.verify === defaultVerify) await initVerifier();
      let sliceStart = performance.now();
      while (this.head < this.queue.length) {
        const item = this.queue[this.head++]!;
        let ok: boolean | undefined;
        if (this.pool && 'event' in item && item.matches) {
          if (!item.verdict) this.flush();
          ok = await item.verdict!.catch(() => false);
          (item.event as Event & { [verifiedSymbol]?: boolean })[verifiedSymbol] = ok;
        } else if ('event' in item && item.matches && this.verify === defaultVerify && !item.sub.closed) {
          if (item.ok === undefined) this.verifyAhead(this.head - 1);
          ok = item.ok;
        }
        try {
          this.deliver(item, ok);
        } catch (e) {
          // A throwing callback must not stop the queue: report it the way
          // an event handler's error is reported, and go on.
          setTimeout(() => {
            throw e;
          });
        }
        if (performance.now() - sliceStart > SLICE_MS) {
          await yieldToEventLoop();
          sliceStart = performance.now();
        }
      }
      this.queue = [];
      this.head = 0;
    } finally {
      this.draining = false;
    }
  }

  // The package's verifier on the main thread: the events waiting from
  // `from` on are verified together, a run at a time (one call into
  // WebAssembly, ids hashed four at once), not one call each.
  private verifyAhead(from: number): void {
    const items: EventItem[] = [];
    const events: Event[] = [];
    const records: (Uint8Array | undefined)[] = [];
    let bytes = 0;
    for (let k = from; k < this.queue.length && items.length < RUN_MAX && bytes < RUN_BYTES; k++) {
      const item = this.queue[k]!;
      if (!('event' in item) || !item.matches || item.ok !== undefined || item.sub.closed) continue;
      items.push(item);
      events.push(item.event);
      records.push(item.record);
      bytes += item.record ? item.record.length : 300 + String(item.event.content).length;
    }
    const out: boolean[] = new Array(items.length);
    verifyRun(events, records, out);
    for (let k = 0; k < items.length; k++) items[k]!.ok = out[k];
  }

  // `verdict` is the worker's, or the main thread's run's.
  private deliver(item: Item, verdict?: boolean): void {
    const sub = item.sub;
    if ('event' in item) {
      if (sub.closed) return;
      const event = item.event;
      if (!item.matches) return sub.drop(event, 'unmatched');
      if (verdict === false || (verdict === undefined && this.verify && !this.verifyItem(item))) {
        return sub.drop(event, 'invalid');
      }
      if (!(event.created_at <= sub.lastEmitted!)) sub.lastEmitted = event.created_at;
      sub.onevent(event);
    } else if ('eose' in item) {
      if (sub.eosed || sub.closed) return;
      sub.eosed = true;
      sub.oneose?.();
    } else {
      if (sub.closed) return;
      sub.closed = true;
      this.openSubs.delete(sub.id);
      sub.onclose?.(item.closed);
    }
  }

  // The package's verifier takes a record as it came (no hex rendered to
  // verify); a verifier of the caller's takes the event.
  private verifyItem(item: EventItem): boolean {
    if (!this.verify) return true;
    if (item.record && this.verify === defaultVerify) {
      const ok = verifyRecord(item.record);
      (item.event as Event & { [verifiedSymbol]?: boolean })[verifiedSymbol] = ok;
      return ok;
    }
    return this.verify(item.event);
  }

  /** Sends one NIP-01 message (a JSON string), as nostr-tools' `send`. */
  async send(message: string): Promise<void> {
    this.sendMessage(message);
  }

  // Throws at once on a closed connection, so no caller leaves a promise
  // behind that rejects later.
  private sendMessage(message: string): void {
    const ws = this.ws;
    if (!ws || !this.transport) throw new Error('sending on a closed connection');
    if (this.transport !== 'json') ws.send(jsonFrame(JSON.parse(message)));
    else ws.send(message);
  }

  private sendEvent(event: Event, type: typeof FRAME_EVENT | typeof FRAME_AUTH): void {
    const ws = this.ws;
    if (!ws || !this.transport) throw new Error('sending on a closed connection');
    if (this.transport !== 'json') ws.send(eventFrame(event, type));
    else ws.send(JSON.stringify([type === FRAME_AUTH ? 'AUTH' : 'EVENT', event]));
  }

  private waitOk(id: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const waiting = this.publishes.get(id) ?? [];
      const pending: Pending<string> = {
        resolve,
        reject,
        timer: setTimeout(() => {
          // Only this call gives up; others for the same id keep waiting.
          waiting.splice(waiting.indexOf(pending), 1);
          if (waiting.length === 0 && this.publishes.get(id) === waiting) this.publishes.delete(id);
          reject(new Error('publish timed out'));
        }, this.publishTimeout),
      };
      waiting.push(pending);
      this.publishes.set(id, waiting);
    });
  }

  /** Publishes an event; resolves with the OK message, rejects with the refusal. */
  async publish(event: Event): Promise<string> {
    this.sendEvent(event, FRAME_EVENT);
    return this.waitOk(event.id);
  }

  /** NIP-42: signs the relay's challenge with `signAuthEvent` and sends it. */
  async auth(signAuthEvent: (template: EventTemplate) => Promise<Event>): Promise<string> {
    const challenge = this.challenge;
    if (!challenge) throw new Error("can't perform auth, no challenge was received");
    const event = await signAuthEvent({
      created_at: Math.floor(Date.now() / 1000),
      kind: 22242,
      tags: [
        ['relay', this.url],
        ['challenge', challenge],
      ],
      content: '',
    });
    this.sendEvent(event, FRAME_AUTH);
    return this.waitOk(event.id);
  }

  /** NIP-45 COUNT. */
  async count(filters: Filter[], params: { id?: string | null } = {}): Promise<number> {
    return (await this.countWithHLL(filters, params)).count;
  }

  /** NIP-45 COUNT, with the relay's HyperLogLog registers (`hll`, 512 hex characters) where it sends them. */
  countWithHLL(filters: Filter[], params: { id?: string | null } = {}): Promise<{ count: number; hll?: string }> {
    const id = params.id ?? `count:${++this.serial}`;
    try {
      this.sendMessage(JSON.stringify(['COUNT', id, ...filters]));
    } catch (e) {
      return Promise.reject(e);
    }
    const result = new Promise<{ count: number; hll?: string }>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.counts.delete(id);
        reject(new Error('count timed out'));
      }, this.publishTimeout);
      this.counts.set(id, { resolve, reject, timer });
    });
    return result;
  }

  subscribe(filters: Filter[], params: SubscriptionParams = {}): Subscription {
    const id = params.id ?? `${params.label ?? 'sub'}:${++this.serial}`;
    const sub = new Subscription(this, id, filters, params);
    this.sendMessage(JSON.stringify(['REQ', id, ...filters]));
    this.openSubs.set(id, sub);
    return sub;
  }

  // The next ping of connection `ws`, and the next after its answer. A
  // relay that answers nothing in time is taken as gone: a socket whose
  // peer stalled may not report its close for a long time.
  private ping(ws: WebSocketLike): void {
    clearTimeout(this.pingTimer);
    this.pingTimer = setTimeout(() => {
      if (this.ws !== ws) return;
      let answered = false;
      const timeout = setTimeout(() => {
        if (answered || this.ws !== ws) return;
        ws.close();
        this.dropped();
      }, this.pingTimeout);
      const answer = () => {
        if (answered) return;
        answered = true;
        clearTimeout(timeout);
        sub.close();
        if (this.ws === ws) this.ping(ws);
      };
      const sub = this.subscribe([{ ids: ['a'.repeat(64)], limit: 1 }], { label: '<forced-ping>', oneose: answer, onclose: answer });
    }, this.pingFrequency);
  }

  close(): void {
    const ws = this.ws;
    const reconnecting = this.reconnectTimer !== undefined;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = undefined;
    if (ws) this.closed();
    else if (reconnecting) this.finish();
    ws?.close();
    if (!this.sharedPool) this.pool?.close();
    this.pool = null;
  }

  // The socket closed without `close()`: with `enableReconnect`, the
  // subscriptions wait for the next connection.
  private dropped(): void {
    if (!this.reconnects) return this.closed(false, true);
    this.closed(true);
    this.reconnect();
  }

  private reconnect(): void {
    const backoff = this.resubscribeBackoff;
    const delay = backoff[Math.min(this.reconnectAttempts++, backoff.length - 1)] ?? 10_000;
    this.reconnectTimer = setTimeout(() => {
      this.connect().then(
        () => {
          // `close()` was called while this attempt was under way.
          if (this.reconnectTimer === undefined) return this.close();
          this.reconnectTimer = undefined;
          this.reconnectAttempts = 0;
          for (const sub of this.openSubs.values()) {
            sub.eosed = sub.eoseArrived = false;
            if (sub.lastEmitted !== undefined) for (const f of sub.filters) f.since = sub.lastEmitted + 1;
            this.sendMessage(JSON.stringify(['REQ', sub.id, ...sub.filters]));
          }
        },
        () => {
          if (this.reconnectTimer !== undefined) this.reconnect();
        },
      );
    }, delay);
  }

  // `keepSubs`: the connection dropped and another is coming; the
  // subscriptions stay open and nothing is told.
  // `queued`: the subscriptions are told after the events that came before
  // the connection dropped (some may still be verified).
  private closed(keepSubs = false, queued = false): void {
    if (!this.ws) return;
    clearTimeout(this.pingTimer);
    this.ws.onmessage = this.ws.onclose = null;
    this.ws = null;
    this.transport = null;
    this.connecting = null;
    this.dictionarySet = null;
    this.decoder = zstdDecoder;
    this.inbound = [];
    this.inboundHead = 0;
    this.batchInProgress = null;
    this.named?.();
    this.named = null;
    this.challenge = undefined;
    for (const p of [...this.publishes.values()].flat()) {
      clearTimeout(p.timer);
      p.reject(new Error('relay connection closed'));
    }
    this.publishes.clear();
    for (const p of this.counts.values()) {
      clearTimeout(p.timer);
      p.reject(new Error('relay connection closed'));
    }
    this.counts.clear();
    if (!keepSubs) this.finish(queued);
  }

  // The subscriptions and the caller are told the connection is gone.
  private finish(queued = false): void {
    for (const sub of this.openSubs.values()) {
      if (queued) {
        this.enqueue({ sub, closed: 'relay connection closed' });
        continue;
      }
      sub.closed = true;
      sub.onclose?.('relay connection closed');
    }
    if (!queued) this.openSubs.clear();
    this.onclose?.();
  }

  /** @internal */
  closeSubscription(sub: Subscription, reason: string): void {
    if (!this.openSubs.delete(sub.id)) return;
    if (this.ws) this.sendMessage(JSON.stringify(['CLOSE', sub.id]));
    sub.onclose?.(reason);
  }
}

export class Subscription {
  closed = false;
  eosed = false;
  /** The relay sent EOSE (`oneose` follows once the events before it are delivered). */
  eoseArrived = false;
  /** The newest `created_at` delivered to `onevent` (a reconnection asks from just after it). */
  lastEmitted: number | undefined;
  /** Events the relay sent that never reached `onevent`, by reason. */
  readonly dropped: Record<DropReason, number> = { invalid: 0, unmatched: 0 };
  onevent: (event: Event) => void;
  oninvalidevent: ((event: Event, reason: DropReason) => void) | undefined;
  oneose: (() => void) | undefined;
  onclose: ((reason: string) => void) | undefined;
  alreadyHaveEvent: ((id: string) => boolean) | undefined;
  knownEvent: ((id: string) => boolean) | undefined;

  constructor(
    readonly relay: Relay,
    readonly id: string,
    readonly filters: Filter[],
    params: SubscriptionParams,
  ) {
    this.onevent = params.onevent ?? (() => {});
    this.oninvalidevent = params.oninvalidevent;
    this.oneose = params.oneose;
    this.onclose = params.onclose;
    this.alreadyHaveEvent = params.alreadyHaveEvent;
    this.knownEvent = params.knownEvent;
  }

  /** @internal */
  drop(event: Event, reason: DropReason): void {
    this.dropped[reason]++;
    this.oninvalidevent?.(event, reason);
  }

  close(reason = 'closed by caller'): void {
    if (this.closed) return;
    this.closed = true;
    this.relay.closeSubscription(this, reason);
  }
}
