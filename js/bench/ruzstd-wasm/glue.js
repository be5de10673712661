// A ZstdDecoder (see src/record.ts) over ruzstd compiled to WebAssembly
// (ruzstd-wasm/src/lib.rs), for js/bench/zstd.mjs.
import { NwbError } from '../../dist/errors.js';
import { parseDictionarySet } from '../../dist/zstd.js';

const MAGIC = [0x28, 0xb5, 0x2f, 0xfd];

export async function ruzstdDecoder(wasmBytes, setBytes) {
  const { instance } = await WebAssembly.instantiate(wasmBytes, {});
  const x = instance.exports;
  const zstdIds = new Map();
  for (const d of parseDictionarySet(setBytes).dictionaries) {
    const p = x.nwb_alloc(d.bytes.length);
    new Uint8Array(x.memory.buffer).set(d.bytes, p);
    const id = x.nwb_add_dict(p, d.bytes.length);
    x.nwb_free(p, d.bytes.length);
    if (!id) throw new NwbError('bad_dictionary_set');
    zstdIds.set(d.id, id);
  }
  // One input and one output area, grown as needed.
  let inCap = 0, inPtr = 0, outCap = 0, outPtr = 0;
  return (payload, out, dictionary) => {
    const zid = dictionary === 0 ? 0 : zstdIds.get(dictionary);
    if (zid === undefined) throw new NwbError('unknown_dictionary');
    const n = payload.length + 4;
    if (n > inCap) {
      if (inCap) x.nwb_free(inPtr, inCap);
      inCap = Math.max(n, 2 * inCap);
      inPtr = x.nwb_alloc(inCap);
    }
    if (out.length > outCap) {
      if (outCap) x.nwb_free(outPtr, outCap);
      outCap = Math.max(out.length, 2 * outCap);
      outPtr = x.nwb_alloc(outCap);
    }
    let mem = new Uint8Array(x.memory.buffer);
    mem.set(MAGIC, inPtr);
    mem.set(payload, inPtr + 4);
    const r = x.nwb_decode(inPtr, n, zid, outPtr, out.length);
    if (r !== out.length) throw new Error('ruzstd: decode failed');
    mem = new Uint8Array(x.memory.buffer);
    out.set(mem.subarray(outPtr, outPtr + out.length));
    return r;
  };
}
