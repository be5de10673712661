// Verification off the main thread: a few Web Workers, each verifying
// batches of events with the same verifier as `verifyEvent`.

import type { Event } from './types.js';

type Pending = { resolve: (verdicts: boolean[]) => void; reject: (e: Error) => void };

export class VerifierPool {
  private readonly workers: Worker[] = [];
  private readonly pending = new Map<number, Pending>();
  private next = 0;
  private serial = 0;

  /** `size` workers started from `url` (the bundled `verify-worker.js`). */
  constructor(size: number, url: URL | string) {
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
        this.fail(new Error(`verifier worker failed: ${ev.message ?? 'error'}`));
      };
      this.workers.push(w);
    }
  }

  /** Verdicts for `events`, in order. */
  verify(events: Event[]): Promise<boolean[]> {
    const id = ++this.serial;
    const worker = this.workers[this.next++ % this.workers.length]!;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      worker.postMessage({ id, events });
    });
  }

  private fail(e: Error): void {
    for (const p of this.pending.values()) p.reject(e);
    this.pending.clear();
  }

  close(): void {
    for (const w of this.workers) w.terminate();
    this.workers.length = 0;
    this.fail(new Error('verifier pool closed'));
  }
}
