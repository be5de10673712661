// nostrwire.v2 dictionary sets (spec/transport.md §6.2): named by the
// SHA-256 of their file, fetched from the relay's `/dictionaries/<hex>`,
// checked against their name and kept: in the Cache API where there is one
// (browsers), in memory always. A set never changes under its name, so a
// cached one is used without asking the relay again.
import { NwbError } from './errors.js';
import type { ZstdDecoder } from './record.js';
import { zstdDecoderWithDictionaries } from './zstd.js';

const CACHE_NAME = 'nostrwire-dictionaries';
// By name: a set is the same whichever relay serves it.
const memory = new Map<string, Promise<ZstdDecoder>>();

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

async function load(url: string, hash: string): Promise<ZstdDecoder> {
  const cached = await fromCache(url, hash);
  if (cached) return cached;
  const cache = await persistent();
  const response = await fetch(url);
  if (!response.ok) throw new Error(`dictionary set ${hash}: HTTP ${response.status}`);
  const bytes = new Uint8Array(await response.arrayBuffer());
  if ((await sha256Hex(bytes)) !== hash) throw new NwbError('bad_dictionary_set', 'the file does not hash to its name');
  const decoder = zstdDecoderWithDictionaries(bytes);
  await cache?.put(url, new Response(bytes)).catch(() => undefined);
  return decoder;
}

/**
 * A zstd decoder for the records of dictionary set `hash` (and those
 * compressed without a dictionary), from the relay at `relayUrl`: from
 * memory, else the Cache API, else fetched. Each set is loaded once per
 * page; a failure is not kept, so a later call tries again.
 */
export function dictionarySet(relayUrl: string, hash: string): Promise<ZstdDecoder> {
  let decoder = memory.get(hash);
  if (!decoder) {
    decoder = load(dictionaryUrl(relayUrl, hash), hash);
    memory.set(hash, decoder);
    decoder.catch(() => memory.delete(hash));
  }
  return decoder;
}

/**
 * The decoder for set `hash` if this page holds it already (in memory or
 * the Cache API), without fetching it; `null` otherwise.
 */
export async function heldDictionarySet(relayUrl: string, hash: string): Promise<ZstdDecoder | null> {
  const loaded = memory.get(hash);
  if (loaded) return loaded.catch(() => null);
  const decoder = await fromCache(dictionaryUrl(relayUrl, hash), hash).catch(() => null);
  if (decoder) memory.set(hash, Promise.resolve(decoder));
  return decoder;
}
