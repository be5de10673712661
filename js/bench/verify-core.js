// The verifier benchmark's measurements, shared by Node (bench/verify.mjs)
// and the Chromium page (bench/verify-page.js): each verifier over the same
// events in memory, one thread, interleaved rounds, fresh event objects per
// pass (parsed before the clock starts, so no verdict is cached), a full
// garbage collection before each pass (`--expose-gc`) and no parsed public
// key cached in this package's verifier.
import { verifyEvent as nobleVerify } from 'nostr-tools/pure';
import { setNostrWasm, verifyEvent as nostrWasmVerify } from 'nostr-tools/wasm';
import { initNostrWasm } from 'nostr-wasm';
import { encodeEvent, initVerifier, verifierName, verifyEvents, verifyRecords } from '../dist/index.js';
import { loadVerifier } from '../dist/verify-wasm.js';
import { clearVerifierCache } from '../dist/verify.js';

/**
 * `lines`: the events as JSON text. `variants`: other builds of the
 * WebAssembly verifier, `{ name: bytes }`, timed through the same packer.
 * Returns `{ method: [µs per event, one per round] }` and the verdict counts.
 */
export async function measure(lines, variants, rounds) {
  setNostrWasm(await initNostrWasm());
  if (!(await initVerifier()) || verifierName() !== 'wasm') throw new Error('the WebAssembly verifier did not load');
  const loaded = {};
  for (const [name, bytes] of Object.entries(variants)) loaded[name] = await loadVerifier(bytes);
  const fresh = () => lines.map((l) => JSON.parse(l));
  const records = fresh().map((e) => encodeEvent(e));
  // The signature checks alone (key, id, signature as bytes), for the split
  // between them and the id hash with the packing.
  const raw = await loadVerifier();
  // And with every key parsed already: the rest is the cost of parsing
  // (lifting) the x-only keys of a cold cache.
  const warm = await loadVerifier();
  const items = new Uint8Array(128 * lines.length);
  records.forEach((r, i) => {
    items.set(r.subarray(11, 43), 128 * i);
    items.set(r.subarray(43, 75), 128 * i + 32);
    items.set(r.subarray(75, 139), 128 * i + 64);
  });

  const methods = {
    noble: (ev) => ev.map((e) => nobleVerify(e)),
    'nostr-wasm': (ev) => ev.map((e) => nostrWasmVerify(e)),
    nostrwire: (ev) => verifyEvents(ev),
    'nostrwire-records': () => verifyRecords(records),
    'nostrwire-signatures': () => Array.from(raw.verifySignatures(items), (x) => x === 1),
    'nostrwire-signatures-warm': () => Array.from(warm.verifySignatures(items), (x) => x === 1),
  };
  for (const [name, v] of Object.entries(loaded)) {
    methods[`variant:${name}`] = (ev) => {
      const out = new Int8Array(ev.length);
      for (let i = 0; i < ev.length; i += 32) v.verifyEvents(ev, i, Math.min(ev.length, i + 32), out);
      return Array.from(out, (x) => x === 1);
    };
  }
  const times = {};
  const valid = {};
  for (const m of Object.keys(methods)) times[m] = [];
  // One warm-up pass each, then rounds in a rotating order.
  const names = Object.keys(methods);
  for (const m of names) await methods[m](fresh());
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < names.length; k++) {
      const m = names[(k + r) % names.length];
      const ev = fresh();
      // Every pass starts with no parsed key cached, as a first REQ does.
      clearVerifierCache();
      raw.clearKeyCache();
      for (const v of Object.values(loaded)) v.clearKeyCache?.();
      // And with no garbage of the method before it to collect (noble's
      // leaves much): a full collection first, where the engine exposes it.
      globalThis.gc?.();
      const t = performance.now();
      const verdicts = await methods[m](ev);
      const ms = performance.now() - t;
      times[m].push((ms * 1000) / lines.length);
      valid[m] = verdicts.filter((x) => x === true).length;
    }
  }
  return { times, valid, events: lines.length };
}
