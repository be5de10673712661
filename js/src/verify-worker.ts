// A Web Worker that verifies batches for `VerifierPool`: receives
// `{ id, events }` (event objects), `{ id, records }` (packed nwb records) or
// `{ id, messages }` (JSON EVENT messages),
// answers `{ id, verdicts }`. Each batch goes to the WebAssembly verifier in
// a few calls, as on the main thread.

import { verifyMessages, type VerifyRequest } from './pool.js';
import { initVerifier, unpackRecords, verifyEvents, verifyRecords } from './verify.js';

const ready = initVerifier();
const scope = globalThis as unknown as {
  onmessage: ((ev: { data: VerifyRequest }) => void) | null;
  postMessage(message: unknown): void;
};
scope.onmessage = async (ev) => {
  await ready;
  const req = ev.data;
  const verdicts =
    'events' in req ? await verifyEvents(req.events) : 'messages' in req ? await verifyMessages(req.messages) : await verifyRecords(unpackRecords(req.records));
  scope.postMessage({ id: req.id, verdicts });
};
