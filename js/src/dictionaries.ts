// nostrwire.v2 dictionary sets (spec/transport.md §6.2): named by the
// SHA-256 of their file, fetched from the relay's `/dictionaries/<hex>`,
// checked against their name and kept: in the Cache API where there is one
// (browsers), in memory always. A set never changes under its name, so a
// cached one is used without asking the relay again.
//
// Only a checked set is shared between relays. A fetch in flight belongs to
// the relay it asks: a relay that names another relay's set and never
// finishes its reply (or sends without end) stalls only itself, and only
// until the fetch's time or size limit.
import { NwbError } from './errors.js';
import type { ZstdDecoder } from './record.js';
import { zstdDecoderWithDictionaries } from './zstd.js';

const CACHE_NAME = 'nostrwire-dictionaries';
/** How long fetching a set may take, in milliseconds, unless a client says otherwise. */
export const DEFAULT_DICTIONARY_SET_TIMEOUT = 30_000;
/** The largest set file fetched, in bytes, unless a client says otherwise. */
export const DEFAULT_MAX_DICTIONARY_SET_BYTES = 16 << 20;

/** Limits on fetching one set. */
export interface SetFetchLimits {
  /** Milliseconds from the request to the last byte. */
  timeout?: number;
  /** Bytes of the set file. */
  maxBytes?: number;
}

// Checked sets, by name: a set is the same whichever relay serves it.
const verified = new Map<string, ZstdDecoder>();
// Fetches in flight, by URL (the relay and the name).
const inFlight = new Map<string, Promise<ZstdDecoder>>();

/** The HTTP(S) URL of set `hash` on the relay at `relayUrl` (ws:// or wss://). */
export function dictionaryUrl(relayUrl: string, hash: string): string {
  const u = new URL(relayUrl);
  u.protocol = u.protocol === 'wss:' ? 'https:' : 'http:';
  u.pathname = `/dictionaries/${hash}`;
  u.search = u.hash = '';
  return u.toString();
}

async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes as Uint8Array<ArrayBuffer>));
  let hex = '';
  for (const b of digest) hex += b.toString(16).padStart(2, '0');
  return hex;
}

type CacheLike = {
  match(url: string): Promise<{ arrayBuffer(): Promise<ArrayBuffer> } | undefined>;
  put(url: string, response: unknown): Promise<void>;
};

async function persistent(): Promise<CacheLike | null> {
  const caches = (globalThis as { caches?: { open(name: string): Promise<CacheLike> } }).caches;
  if (!caches) return null;
  try {
    return await caches.open(CACHE_NAME);
  } catch {
    // Opaque origins and some private modes refuse storage.
    return null;
  }
}

async function fromCache(url: string, hash: string): Promise<ZstdDecoder | null> {
  const cache = await persistent();
  const cached = await cache?.match(url).catch(() => undefined);
  if (!cached) return null;
  const bytes = new Uint8Array(await cached.arrayBuffer());
  return (await sha256Hex(bytes)) === hash ? zstdDecoderWithDictionaries(bytes) : null;
}

// The body, refused as soon as it passes `max` bytes (declared or sent).
async function body(response: Response, hash: string, max: number): Promise<Uint8Array> {
  const tooLarge = () => new Error(`dictionary set ${hash}: larger than ${max} bytes`);
  if (Number(response.headers.get('content-length')) > max) throw tooLarge();
  const reader = response.body?.getReader();
  if (!reader) {
    const bytes = new Uint8Array(await response.arrayBuffer());
    if (bytes.length > max) throw tooLarge();
    return bytes;
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > max) {
      void reader.cancel().catch(() => undefined);
      throw tooLarge();
    }
    chunks.push(value);
  }
  if (chunks.length === 1) return chunks[0]!;
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    bytes.set(c, at);
    at += c.length;
  }
  return bytes;
}

// Fetches the set within `timeout` ms (the request aborted then) and
// `maxBytes`, and checks it against its name.
async function fetchSet(url: string, hash: string, timeout: number, maxBytes: number): Promise<Uint8Array> {
  const controller = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      controller.abort();
      reject(new Error(`dictionary set ${hash}: not fetched within ${timeout} ms`));
    }, timeout);
  });
  try {
    const bytes = await Promise.race([
      (async () => {
        const response = await fetch(url, { signal: controller.signal });
        if (!response.ok) throw new Error(`dictionary set ${hash}: HTTP ${response.status}`);
        return body(response, hash, maxBytes);
      })(),
      expired,
    ]);
    if ((await sha256Hex(bytes)) !== hash) throw new NwbError('bad_dictionary_set', 'the file does not hash to its name');
    return bytes;
  } finally {
    clearTimeout(timer);
  }
}

async function load(url: string, hash: string, limits: SetFetchLimits): Promise<ZstdDecoder> {
  const cached = await fromCache(url, hash);
  if (cached) return cached;
  const cache = await persistent();
  const bytes = await fetchSet(
    url,
    hash,
    limits.timeout ?? DEFAULT_DICTIONARY_SET_TIMEOUT,
    limits.maxBytes ?? DEFAULT_MAX_DICTIONARY_SET_BYTES,
  );
  const decoder = zstdDecoderWithDictionaries(bytes);
  await cache?.put(url, new Response(bytes as Uint8Array<ArrayBuffer>)).catch(() => undefined);
  return decoder;
}

/**
 * A zstd decoder for the records of dictionary set `hash` (and those
 * compressed without a dictionary), from the relay at `relayUrl`: a set
 * this page checked already (from any relay), else the Cache API, else
 * fetched from that relay within `limits`. Concurrent calls for one relay
 * share its fetch; a failure is not kept, so a later call tries again.
 */
export function dictionarySet(relayUrl: string, hash: string, limits: SetFetchLimits = {}): Promise<ZstdDecoder> {
  const known = verified.get(hash);
  if (known) return Promise.resolve(known);
  const url = dictionaryUrl(relayUrl, hash);
  let loading = inFlight.get(url);
  if (!loading) {
    loading = load(url, hash, limits)
      .then((decoder) => {
        verified.set(hash, decoder);
        return decoder;
      })
      .finally(() => inFlight.delete(url));
    inFlight.set(url, loading);
  }
  return loading;
}

/**
 * The decoder for set `hash` if this page holds it already, checked (in
 * memory or the Cache API), without fetching it and without waiting for a
 * fetch in flight; `null` otherwise.
 */
export async function heldDictionarySet(relayUrl: string, hash: string): Promise<ZstdDecoder | null> {
  const known = verified.get(hash);
  if (known) return known;
  const decoder = await fromCache(dictionaryUrl(relayUrl, hash), hash).catch(() => null);
  if (decoder) verified.set(hash, decoder);
  return decoder;
}
