// The measurement behind js/bench/zstd.mjs, shared by Node and the page:
// decompressing every compressed record of a stream, and decodeEvents of
// the whole stream, with each zstd decoder, interleaved over rounds; and
// the first such pass in a fresh process or page (runCold).
import { decodeEvents, decompressRecord, useZstd } from '../dist/index.js';
import { NwbError } from '../dist/errors.js';
import { packRecords } from '../dist/verify.js';
import { zstdDecoderWithDictionaries } from '../dist/zstd.js';
import { ruzstdDecoder } from './ruzstd-wasm/glue.js';

/**
 * The zstd of the package's WebAssembly module (crates/verify-wasm,
 * src/zstd.rs): `decoder`, a ZstdDecoder copying each frame in and each
 * record out; `batch(packed, count)`, one call over records packed as a
 * u32 length and the record each (what a batch decode in the module does).
 */
export async function verifierZstd(wasmBytes, setBytes, now = () => performance.now()) {
  const t0 = now();
  const { instance } = await WebAssembly.instantiate(wasmBytes, {});
  const instantiateMs = now() - t0;
  const x = instance.exports;
  const t1 = now();
  const at = x.nw_reserve(0, setBytes.length);
  new Uint8Array(x.memory.buffer).set(setBytes, at);
  const dictionaries = x.nw_zstd_load_set(setBytes.length);
  const loadMs = now() - t1;
  if (dictionaries < 0) throw new NwbError('bad_dictionary_set', `nw_zstd_load_set: ${dictionaries}`);
  const decoder = (payload, out, dictionary) => {
    const p = x.nw_reserve(0, payload.length + out.length);
    if (!p) throw new Error('out of memory');
    new Uint8Array(x.memory.buffer).set(payload, p);
    const r = x.nw_zstd_decompress(dictionary, payload.length, out.length);
    if (r === -2) throw new NwbError('unknown_dictionary', `dictionary ${dictionary}`);
    if (r !== 0) throw new NwbError('decompress', `zstd: ${r}`);
    out.set(new Uint8Array(x.memory.buffer, p + payload.length, out.length));
    return out.length;
  };
  const batch = (packed, count) => {
    const p = x.nw_reserve(0, packed.length);
    new Uint8Array(x.memory.buffer).set(packed, p);
    const total = x.nw_zstd_decompress_records(count, packed.length);
    if (total < 0) throw new Error(`nw_zstd_decompress_records: ${total}`);
    return total;
  };
  return { decoder, batch, instantiateMs, loadMs, dictionaries };
}

/** Records packed as a little-endian u32 length and the bytes each. */
export const pack = packRecords;

export const compressedRecords = (stream) => frames(stream).filter((f) => f[0] === 0x81);

/**
 * One cold measurement, the first zstd work of a fresh process or page:
 * `typescript`, making the package's decoder for the set (`prepareMs`) then
 * decompressing every compressed record once (`firstMs`); `nostrwire`,
 * instantiating the module (`instantiateMs`, which the verifier pays
 * anyway), loading the set (`prepareMs`), then one batch call over the
 * same records (`firstMs`, copying them in included).
 */
export async function runCold({ which, set, stream, verifier, now = () => performance.now() }) {
  const compressed = compressedRecords(stream);
  if (which === 'typescript') {
    const t0 = now();
    const decoder = zstdDecoderWithDictionaries(set);
    const prepareMs = now() - t0;
    const t1 = now();
    let total = 0;
    for (const f of compressed) total += decompressRecord(f, undefined, decoder).length;
    return { which, prepareMs, firstMs: now() - t1, bytes: total };
  }
  const packed = pack(compressed);
  const v = await verifierZstd(verifier, set, now);
  const t1 = now();
  const total = v.batch(packed, compressed.length);
  return { which, instantiateMs: v.instantiateMs, prepareMs: v.loadMs, firstMs: now() - t1, bytes: total };
}

function frames(bytes) {
  const out = [];
  let p = 0;
  while (p < bytes.length) {
    let len = 0, shift = 0, b;
    do {
      b = bytes[p++];
      len += (b & 0x7f) * 2 ** shift;
      shift += 7;
    } while (b & 0x80);
    out.push(bytes.subarray(p, p + len));
    p += len;
  }
  return out;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/**
 * streams: [{ name, set, stream }] (bytes); wasm: ruzstd's bytes; verifier:
 * the package's module's bytes. `nostrwire` is that module through a
 * ZstdDecoder (a copy in and out per record); `batch` is its one call over
 * all the records.
 */
export async function runBench({ streams, wasm, verifier, rounds = 15, now = () => performance.now() }) {
  const results = [];
  for (const { name, set, stream } of streams) {
    const t0 = now();
    const impls = { typescript: zstdDecoderWithDictionaries(set) };
    const tsPrepare = now() - t0;
    const t1 = now();
    impls.ruzstd = await ruzstdDecoder(wasm, set);
    const ruzstdPrepare = now() - t1;
    const v = await verifierZstd(verifier, set, now);
    impls.nostrwire = v.decoder;
    const compressed = compressedRecords(stream);
    const packed = pack(compressed);
    // Every record, byte for byte, as the TypeScript decoder gives it.
    for (const f of compressed) {
      const a = decompressRecord(f, undefined, impls.typescript);
      const b = decompressRecord(f, undefined, v.decoder);
      if (a.length !== b.length || a.some((x, i) => x !== b[i])) throw new Error('the module and the TypeScript decoder differ');
    }
    const times = { typescript: { zstd: [], events: [] }, ruzstd: { zstd: [], events: [] }, nostrwire: { zstd: [], events: [] }, batch: { zstd: [] } };
    let outBytes = 0;
    for (let round = -3; round < rounds; round++) {
      const b0 = now();
      const batchBytes = v.batch(packed, compressed.length);
      if (round >= 0) times.batch.zstd.push(now() - b0);
      if (outBytes && batchBytes !== outBytes) throw new Error('batch: wrong size');
      for (const [impl, decoder] of Object.entries(impls)) {
        useZstd(decoder);
        let s = now();
        let total = 0;
        for (const f of compressed) total += decompressRecord(f).length;
        const zstdMs = now() - s;
        s = now();
        const events = decodeEvents(stream);
        const eventsMs = now() - s;
        if (events.length === 0) throw new Error('no events');
        outBytes = total;
        if (round >= 0) {
          times[impl].zstd.push(zstdMs);
          times[impl].events.push(eventsMs);
        }
      }
    }
    results.push({
      stream: name,
      records: compressed.length,
      decompressedBytes: outBytes,
      streamBytes: stream.length,
      prepareMs: { typescript: tsPrepare, ruzstd: ruzstdPrepare, nostrwire: v.loadMs },
      zstdMs: {
        typescript: median(times.typescript.zstd),
        ruzstd: median(times.ruzstd.zstd),
        nostrwire: median(times.nostrwire.zstd),
        batch: median(times.batch.zstd),
      },
      decodeEventsMs: {
        typescript: median(times.typescript.events),
        ruzstd: median(times.ruzstd.events),
        nostrwire: median(times.nostrwire.events),
      },
    });
  }
  useZstd(null);
  return results;
}
