// A Web Worker that verifies batches of events for `VerifierPool`:
// receives `{ id, events }`, answers `{ id, verdicts }`.

import { initVerifier, verifyEvent } from './verify.js';
import type { Event } from './types.js';

const ready = initVerifier();
const scope = globalThis as unknown as {
  onmessage: ((ev: { data: { id: number; events: Event[] } }) => void) | null;
  postMessage(message: unknown): void;
};
scope.onmessage = async (ev) => {
  await ready;
  const { id, events } = ev.data;
  scope.postMessage({ id, verdicts: events.map((e) => verifyEvent(e)) });
};
