// The zstd decoder for compressed records (spec/nwb.md §11) and dictionary
// set files (§11.2), kept out of the core: `useZstd(zstdDecoder)` turns
// compressed records on, `useZstd(zstdDecoderWithDictionaries(setFile))`
// those compressed with a dictionary set too.
import { NwbError } from './errors.js';
import type { ZstdDecoder } from './record.js';
import { type ZstdDictionary, decompressFrame, prepareDictionary } from './zstd-frame.js';

/** Magic bytes of a dictionary set file (§11.2). */
const SET_MAGIC = [0x4e, 0x57, 0x42, 0x44]; // "NWBD"
const SET_VERSION = 1;
const MAX_LEVEL = 19;
/** Largest dictionary a set file may hold (§11.2). */
export const MAX_DICTIONARY_BYTES = 1 << 24;

/** One dictionary of a set (§11.2). */
export interface DictionaryEntry {
  /** The id compressed records name (1 to 2^32 − 1). */
  readonly id: number;
  /** The kind it serves, or `null` for the fallback dictionary. */
  readonly kind: number | null;
  /** The zstd dictionary (a view into the set file's bytes). */
  readonly bytes: Uint8Array;
}

/** A parsed dictionary set file (§11.2). */
export interface DictionarySet {
  /** The zstd level the writer uses (1 to 19); decoding does not need it. */
  readonly level: number;
  readonly dictionaries: readonly DictionaryEntry[];
}

const bad = (detail: string): NwbError => new NwbError('bad_dictionary_set', detail);

/**
 * Parses a dictionary set file (§11.2), as `nostrwire dict train` writes
 * it. Throws {@link NwbError} `bad_dictionary_set` for anything else; every
 * count and length is checked against the bytes that remain before it is
 * used. The entries are views into `bytes`, which must not change after.
 */
export function parseDictionarySet(bytes: Uint8Array): DictionarySet {
  if (!(bytes instanceof Uint8Array)) throw new NwbError('wrong_type', 'a dictionary set is a Uint8Array');
  const len = bytes.length;
  if (len < 7 || SET_MAGIC.some((b, i) => bytes[i] !== b)) throw bad('no NWBD magic');
  if (bytes[4] !== SET_VERSION) throw bad('unknown set file version');
  const level = (bytes[5]! << 24) >> 24;
  if (level < 1 || level > MAX_LEVEL) throw bad('level outside 1..19');
  let pos = 6;
  // A minimal LEB128 varint (§4) of at most 2^53 − 1: larger values are
  // refused by every check below anyway.
  const varint = (): number => {
    let value = 0;
    for (let shift = 0; ; shift += 7) {
      if (pos >= len) throw bad('truncated');
      const b = bytes[pos++]!;
      if (shift === 49 && b > 0x0f) throw bad('varint too large');
      value += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) {
        if (b === 0 && shift > 0) throw bad('overlong varint');
        return value;
      }
    }
  };
  const count = varint();
  // Each entry takes at least three bytes.
  if (count > (len - pos) / 3) throw bad('more entries than bytes');
  const dictionaries: DictionaryEntry[] = [];
  const ids = new Set<number>();
  const kinds = new Set<number>();
  for (let i = 0; i < count; i++) {
    const id = varint();
    const selector = varint();
    const length = varint();
    if (id === 0 || id > 0xffffffff) throw bad('dictionary id outside 1..2^32-1');
    if (ids.has(id)) throw bad('duplicate dictionary id');
    if (selector > 0x10000) throw bad('kind above 65535');
    if (kinds.has(selector)) throw bad(selector ? 'two dictionaries for one kind' : 'two fallback dictionaries');
    if (length > MAX_DICTIONARY_BYTES) throw bad('dictionary over 16 MiB');
    if (length > len - pos) throw bad('truncated');
    ids.add(id);
    kinds.add(selector);
    dictionaries.push({ id, kind: selector === 0 ? null : selector - 1, bytes: bytes.subarray(pos, pos + length) });
    pos += length;
  }
  if (pos !== len) throw bad('bytes after the last dictionary');
  return { level, dictionaries };
}

/**
 * A {@link ZstdDecoder} for compressed records without a dictionary
 * (`D = 0`); records that name one are refused with `unknown_dictionary`.
 */
export const zstdDecoder: ZstdDecoder = (payload, out, dictionary) => {
  if (dictionary !== 0) throw new NwbError('unknown_dictionary', `dictionary ${dictionary}`);
  return decompressFrame(payload, out, null);
};

/**
 * A {@link ZstdDecoder} for compressed records with the dictionaries of a
 * set file (§11.2: its bytes, or {@link parseDictionarySet}'s result) and
 * without one. Every dictionary is checked here: a malformed set, or a zstd
 * dictionary with malformed entropy tables, throws {@link NwbError}
 * `bad_dictionary_set`. The tables that check builds are kept (about 10 KB
 * a dictionary), so no record waits for its dictionary to be prepared.
 * Records naming an id the set lacks are refused with `unknown_dictionary`.
 *
 * ```js
 * useZstd(zstdDecoderWithDictionaries(new Uint8Array(await (await fetch('/dicts.nwbd')).arrayBuffer())));
 * decodeEvents(stream);
 * ```
 */
export function zstdDecoderWithDictionaries(set: Uint8Array | ArrayBuffer | DictionarySet): ZstdDecoder {
  const file = set instanceof ArrayBuffer ? new Uint8Array(set) : set instanceof Uint8Array ? set : null;
  const parsed = file ? parseDictionarySet(file) : (set as DictionarySet);
  if (!Array.isArray(parsed?.dictionaries)) throw new NwbError('wrong_type', 'not a dictionary set');
  const prepared = new Map<number, ZstdDictionary>();
  for (const entry of parsed.dictionaries) {
    if (!(entry?.bytes instanceof Uint8Array) || typeof entry.id !== 'number') throw new NwbError('wrong_type', 'not a dictionary set entry');
    let dict: ZstdDictionary;
    try {
      dict = prepareDictionary(entry.bytes);
    } catch {
      throw bad(`dictionary ${entry.id} has malformed entropy tables`);
    }
    prepared.set(entry.id, dict);
  }
  const decoder: ZstdDecoder = (payload, out, dictionary) => {
    if (dictionary === 0) return decompressFrame(payload, out, null);
    const dict = prepared.get(dictionary);
    if (!dict) throw new NwbError('unknown_dictionary', `dictionary ${dictionary}`);
    return decompressFrame(payload, out, dict);
  };
  if (file) setFiles.set(decoder, file);
  return decoder;
}

// The set file each decoder was made from, for the WebAssembly module
// (which decodes nostrwire.v2 batches with the same dictionaries).
const setFiles = new WeakMap<ZstdDecoder, Uint8Array>();

/** The set file `decoder` was made from, if it was made from one. @internal */
export function dictionarySetFile(decoder: ZstdDecoder): Uint8Array | undefined {
  return setFiles.get(decoder);
}
