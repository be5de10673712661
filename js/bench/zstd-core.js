// The measurement behind js/bench/zstd.mjs, shared by Node and the page:
// decompressing every compressed record of a stream, and decodeEvents of
// the whole stream, with each zstd decoder, interleaved over rounds.
import { decodeEvents, decompressRecord, useZstd } from '../dist/index.js';
import { zstdDecoderWithDictionaries } from '../dist/zstd.js';
import { ruzstdDecoder } from './ruzstd-wasm/glue.js';

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

/** streams: [{ name, set, stream }] (bytes); wasm: ruzstd's bytes. */
export async function runBench({ streams, wasm, rounds = 15, now = () => performance.now() }) {
  const results = [];
  for (const { name, set, stream } of streams) {
    const t0 = now();
    const impls = { typescript: zstdDecoderWithDictionaries(set) };
    const tsPrepare = now() - t0;
    const t1 = now();
    impls.ruzstd = await ruzstdDecoder(wasm, set);
    const ruzstdPrepare = now() - t1;
    const compressed = frames(stream).filter((f) => f[0] === 0x81);
    const times = { typescript: { zstd: [], events: [] }, ruzstd: { zstd: [], events: [] } };
    let outBytes = 0;
    for (let round = -3; round < rounds; round++) {
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
      prepareMs: { typescript: tsPrepare, ruzstd: ruzstdPrepare },
      zstdMs: { typescript: median(times.typescript.zstd), ruzstd: median(times.ruzstd.zstd) },
      decodeEventsMs: { typescript: median(times.typescript.events), ruzstd: median(times.ruzstd.events) },
    });
  }
  useZstd(null);
  return results;
}
