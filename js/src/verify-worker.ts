// A Web Worker that verifies batches for `VerifierPool`: receives
// `{ id, events }` (event objects) or `{ id, records }` (packed nwb records),
// answers `{ id, verdicts }`.

import type { VerifyRequest } from './pool.js';
import { initVerifier, unpackRecords, verifyEvent, verifyRecord } from './verify.js';

const ready = initVerifier();
const scope = globalThis as unknown as {
  onmessage: ((ev: { data: VerifyRequest }) => void) | null;
  postMessage(message: unknown): void;
};
scope.onmessage = async (ev) => {
  await ready;
  const req = ev.data;
  const verdicts = 'events' in req ? req.events.map((e) => verifyEvent(e)) : unpackRecords(req.records).map((r) => verifyRecord(r));
  scope.postMessage({ id: req.id, verdicts });
};
