// The verifier in Chromium, for test/verify-differential.test.mjs: verdicts
// of the package's verifier (main thread and two workers) for events and
// nwb records made in Node.
import { initVerifier, verifierName, verifyEvents, verifyRecords } from '../../src/index.ts';
import { VerifierPool } from '../../src/pool.ts';
import { loadVerifier } from '../../src/verify-wasm.ts';

const unhex = (s) => new Uint8Array(s.match(/../g)?.map((h) => parseInt(h, 16)) ?? []);

window.verdicts = async ({ events, records, signatures, hashMessages }) => {
  await initVerifier();
  const recs = records.map(unhex);
  const pool = new VerifierPool(2, new URL('verify-worker.js', location.href));
  const half = Math.floor(events.length / 2);
  const fromPool = [
    ...(await Promise.all([pool.verify(events.slice(0, half).map((e) => structuredClone(e))), pool.verify(events.slice(half).map((e) => structuredClone(e)))])).flat(),
  ];
  const recordsFromPool = (await Promise.all([pool.verifyRecords(recs.slice(0, 100)), pool.verifyRecords(recs.slice(100))])).flat();
  const poolFailure = pool.failure ? String(pool.failure) : null;
  pool.close();
  const raw = await loadVerifier();
  return {
    verifier: verifierName(),
    events: await verifyEvents(events),
    records: await verifyRecords(recs),
    eventsFromPool: fromPool,
    recordsFromPool,
    poolFailure,
    signatures: Array.from(raw.verifySignatures(unhex(signatures))),
    digests: Array.from(raw.sha256Many(hashMessages.map(unhex)), (b) => b.toString(16).padStart(2, '0')).join(''),
  };
};
// The page served with a Content-Security-Policy that forbids WebAssembly:
// the verifier falls back to noble, with the same verdicts.
window.withoutWasm = async ({ events, records }) => {
  const loaded = await initVerifier();
  return {
    loaded,
    verifier: verifierName(),
    events: await verifyEvents(events),
    records: await verifyRecords(records.map(unhex)),
  };
};
window.ready = true;
