// Verification off the main thread: a few Web Workers, each verifying
// batches of events with the same verifier as `verifyEvent`.
//
// Workers can fail where the page cannot see it coming: a bundler that
// moved `verify-worker.js`, a Content-Security-Policy without `worker-src`,
// a worker that crashes. Then the pool verifies on the main thread (in
// slices, `verifyEvents`) from that moment on, including the batches the
// workers held: no event is lost or taken as invalid because a worker died,
// and no subscription waits for an answer that will not come.

import type { Event } from './types.js';
import { packRecords, unpackRecords, verifyEvents, verifyRecords } from './verify.js';

/** What a worker is asked to verify: event objects, or packed nwb records. */
export type VerifyRequest = { id: number; events: Event[] } | { id: number; records: Uint8Array };

type Pending = {
  // Kept so that the main thread can verify them if the workers fail.
  events?: Event[];
  records?: Uint8Array;
  resolve: (verdicts: boolean[]) => void;
  reject: (e: Error) => void;
};

function verifyHere(p: Pending): Promise<boolean[]> {
  return p.events ? verifyEvents(p.events) : verifyRecords(unpackRecords(p.records!));
}

export class VerifierPool {
  private readonly workers: Worker[] = [];
  private readonly pending = new Map<number, Pending>();
  private next = 0;
  private serial = 0;
  private failed: Error | null = null;
  private closed = false;

  /** `size` workers started from `url` (the bundled `verify-worker.js`). */
  constructor(size: number, url: URL | string) {
    try {
      for (let i = 0; i < size; i++) {
        const w = new Worker(url, { type: 'module' });
        w.onmessage = (ev: MessageEvent<{ id: number; verdicts: boolean[] }>) => {
          const p = this.pending.get(ev.data.id);
          if (!p) return;
          this.pending.delete(ev.data.id);
          p.resolve(ev.data.verdicts);
        };
        w.onerror = (ev) => {
          ev.preventDefault?.();
          this.fail(new Error(`verifier worker failed: ${ev.message || 'could not load or run verify-worker.js'}`));
        };
        w.onmessageerror = () => this.fail(new Error('verifier worker sent a message that could not be read'));
        this.workers.push(w);
      }
    } catch (e) {
      // `new Worker` throws where workers are forbidden (SecurityError).
      this.fail(e instanceof Error ? e : new Error(String(e)));
    }
  }

  /**
   * Why the workers stopped, or `null` while they run. Once set, events are
   * verified on the main thread.
   */
  get failure(): Error | null {
    return this.failed;
  }

  /** Verdicts for `events`, in order. */
  verify(events: Event[]): Promise<boolean[]> {
    if (this.closed) return Promise.reject(new Error('verifier pool closed'));
    if (this.failed) return verifyEvents(events);
    const id = ++this.serial;
    const worker = this.workers[this.next++ % this.workers.length]!;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { events, resolve, reject });
      worker.postMessage({ id, events } satisfies VerifyRequest);
    });
  }

  /**
   * Verdicts for nwb event records (form byte 0x01, as `verifyRecord`
   * takes them), in order. The records are copied into one buffer that is
   * transferred to a worker, so the caller's buffers stay usable.
   */
  verifyRecords(records: Uint8Array[]): Promise<boolean[]> {
    if (this.closed) return Promise.reject(new Error('verifier pool closed'));
    if (this.failed) return verifyRecords(records);
    const packed = packRecords(records);
    const id = ++this.serial;
    const worker = this.workers[this.next++ % this.workers.length]!;
    return new Promise((resolve, reject) => {
      // The worker gets the buffer; the pending entry keeps a copy in case
      // the worker dies holding it.
      this.pending.set(id, { records: packed.slice(), resolve, reject });
      worker.postMessage({ id, records: packed } satisfies VerifyRequest, [packed.buffer]);
    });
  }

  // The workers are of no more use: what they held is verified here.
  private fail(e: Error): void {
    if (this.failed || this.closed) return;
    this.failed = e;
    this.stopWorkers();
    const held = [...this.pending.values()];
    this.pending.clear();
    for (const p of held) verifyHere(p).then(p.resolve, p.reject);
  }

  private stopWorkers(): void {
    for (const w of this.workers) w.terminate();
    this.workers.length = 0;
  }

  close(): void {
    this.closed = true;
    this.stopWorkers();
    for (const p of this.pending.values()) p.reject(new Error('verifier pool closed'));
    this.pending.clear();
  }
}
