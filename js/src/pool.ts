// Verification off the main thread: a few Web Workers, each verifying
// batches of events with the same verifier as `verifyEvent`.
//
// Workers can fail where the page cannot see it coming: a bundler that
// moved `verify-worker.js`, a Content-Security-Policy without `worker-src`,
// a worker that crashes. Then the pool verifies on the main thread (in
// slices, `verifyEvents`) from that moment on, including the batches the
// workers held: no event is lost or taken as invalid because a worker died,
// and no subscription waits for an answer that will not come.
//
// Batches wait here, in one queue per source (a pool's relays), until a
// worker has room: each worker holds at most two, and the next batch is
// taken from each source in turn. A relay that floods the workers then
// delays another relay's batch by the two each worker holds, never by its
// whole backlog. Small batches of one source that wait are merged (up to
// 64 events), so a source may hand events over as soon as it has them.

import type { Event } from './types.js';
import { packRecords, unpackRecords, verifyEvents, verifyRecords } from './verify.js';

/**
 * What a worker is asked to verify: event objects, packed nwb records, or
 * the JSON `EVENT` messages the events came in (a string costs less to
 * post than the object it parses to).
 */
export type VerifyRequest = { id: number; events: Event[] } | { id: number; records: Uint8Array } | { id: number; messages: string[] };

type Pending = {
  // Kept so that the main thread can verify them if the workers fail.
  events?: Event[];
  records?: Uint8Array;
  messages?: string[];
  resolve: (verdicts: boolean[]) => void;
  reject: (e: Error) => void;
};

// What one message to a worker asks: the batches (by pending id, with
// their sizes) merged into it, all events or all packed records.
type Kind = 'events' | 'records' | 'messages';
type Job = { id: number; parts: { id: number; count: number }[]; kind: Kind; items: (Event | Uint8Array | string)[]; count: number };

/** Batches one worker holds at once: one verified, the next on its way. */
const PER_WORKER = 2;
/** Waiting batches of one source are merged up to this many events. */
const MERGE_MAX = 64;

function verifyHere(p: Pending): Promise<boolean[]> {
  if (p.messages) return verifyMessages(p.messages);
  return p.events ? verifyEvents(p.events) : verifyRecords(unpackRecords(p.records!));
}

/**
 * Verdicts for the events of JSON `EVENT` messages (`["EVENT", id,
 * event]`), in order; a message without an event object is false.
 */
export function verifyMessages(messages: string[]): Promise<boolean[]> {
  const events: Event[] = [];
  const at: number[] = [];
  messages.forEach((m, i) => {
    let event: unknown;
    try {
      event = (JSON.parse(m) as unknown[])[2];
    } catch {
      return;
    }
    if (typeof event !== 'object' || event === null) return;
    at.push(i);
    events.push(event as Event);
  });
  return verifyEvents(events).then((verdicts) => {
    const out: boolean[] = new Array(messages.length).fill(false);
    at.forEach((i, k) => (out[i] = verdicts[k]!));
    return out;
  });
}

function concat(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0]!.slice();
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export class VerifierPool {
  private readonly workers: Worker[] = [];
  private readonly pending = new Map<number, Pending>();
  // Per worker, the jobs it holds.
  private readonly held: Map<number, Job>[] = [];
  // Per source, the jobs waiting; `turns`: the sources with jobs waiting,
  // the next to be served first.
  private readonly waiting = new Map<unknown, Job[]>();
  private turns: unknown[] = [];
  private serial = 0;
  private failed: Error | null = null;
  private closed = false;

  /** `size` workers started from `url` (the bundled `verify-worker.js`). */
  constructor(size: number, url: URL | string) {
    try {
      for (let i = 0; i < size; i++) {
        const w = new Worker(url, { type: 'module' });
        const held = new Map<number, Job>();
        w.onmessage = (ev: MessageEvent<{ id: number; verdicts: boolean[] }>) => {
          const job = held.get(ev.data.id);
          if (!job) return;
          held.delete(job.id);
          this.dispatch();
          let at = 0;
          for (const part of job.parts) {
            const p = this.pending.get(part.id);
            const verdicts = ev.data.verdicts.slice(at, (at += part.count));
            if (!p) continue;
            this.pending.delete(part.id);
            p.resolve(verdicts);
          }
        };
        w.onerror = (ev) => {
          ev.preventDefault?.();
          this.fail(new Error(`verifier worker failed: ${ev.message || 'could not load or run verify-worker.js'}`));
        };
        w.onmessageerror = () => this.fail(new Error('verifier worker sent a message that could not be read'));
        this.workers.push(w);
        this.held.push(held);
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

  /**
   * Verdicts for `events`, in order. `source` (a relay, say) names whose
   * batch it is: sources take turns for the workers.
   */
  verify(events: Event[], source?: unknown): Promise<boolean[]> {
    return this.submit(source, 'events', () => verifyEvents(events), () => ({ kept: { events }, items: events }));
  }

  /**
   * Verdicts for the events of JSON `EVENT` messages, in order: the
   * workers parse them (as `JSON.parse` parsed them here).
   */
  verifyMessages(messages: string[], source?: unknown): Promise<boolean[]> {
    return this.submit(source, 'messages', () => verifyMessages(messages), () => ({ kept: { messages }, items: messages }));
  }

  /**
   * Verdicts for nwb event records (form byte 0x01, as `verifyRecord`
   * takes them), in order. The records are copied into one buffer that is
   * transferred to a worker, so the caller's buffers stay usable.
   */
  verifyRecords(records: Uint8Array[], source?: unknown): Promise<boolean[]> {
    return this.submit(source, 'records', () => verifyRecords(records), () => {
      const packed = packRecords(records);
      return { kept: { records: packed }, items: [packed], count: records.length };
    });
  }

  // A batch for the workers (`prepare`: what the pending entry keeps, and
  // what is queued), or for `here` once they failed.
  private submit(
    source: unknown,
    kind: Kind,
    here: () => Promise<boolean[]>,
    prepare: () => { kept: Omit<Pending, 'resolve' | 'reject'>; items: (Event | Uint8Array | string)[]; count?: number },
  ): Promise<boolean[]> {
    if (this.closed) return Promise.reject(new Error('verifier pool closed'));
    if (this.failed) return here();
    const { kept, items, count } = prepare();
    const id = ++this.serial;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { ...kept, resolve, reject });
      this.queue(source, id, kind, items, count);
    });
  }

  // `items`: the events or messages, or one packed buffer of `count` records.
  private queue(source: unknown, id: number, kind: Kind, items: (Event | Uint8Array | string)[], count = items.length): void {
    let jobs = this.waiting.get(source);
    if (!jobs) {
      this.waiting.set(source, (jobs = []));
      this.turns.push(source);
    }
    const last = jobs[jobs.length - 1];
    if (last && last.count + count <= MERGE_MAX && last.kind === kind) {
      last.parts.push({ id, count });
      last.count += count;
      last.items.push(...items);
    } else {
      jobs.push({ id, parts: [{ id, count }], kind, items: [...items], count });
    }
    this.dispatch();
  }

  // Hands waiting jobs to the workers with room, a source at a time.
  private dispatch(): void {
    while (this.turns.length > 0 && this.workers.length > 0 && !this.failed && !this.closed) {
      let k = 0;
      for (let i = 1; i < this.workers.length; i++) if (this.held[i]!.size < this.held[k]!.size) k = i;
      if (this.held[k]!.size >= PER_WORKER) return;
      const source = this.turns.shift();
      const jobs = this.waiting.get(source)!;
      const job = jobs.shift()!;
      if (jobs.length > 0) this.turns.push(source);
      else this.waiting.delete(source);
      this.held[k]!.set(job.id, job);
      const worker = this.workers[k]!;
      if (job.kind === 'events') worker.postMessage({ id: job.id, events: job.items as Event[] } satisfies VerifyRequest);
      else if (job.kind === 'messages') worker.postMessage({ id: job.id, messages: job.items as string[] } satisfies VerifyRequest);
      else {
        // The pending batches keep their own copies, in case the worker
        // dies holding this one.
        const packed = concat(job.items as Uint8Array[]);
        worker.postMessage({ id: job.id, records: packed } satisfies VerifyRequest, [packed.buffer]);
      }
    }
  }

  // The workers are of no more use: what they held or was waiting for
  // them is verified here.
  private fail(e: Error): void {
    if (this.failed || this.closed) return;
    this.failed = e;
    this.stopWorkers();
    this.waiting.clear();
    this.turns = [];
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
    this.waiting.clear();
    this.turns = [];
    for (const p of this.pending.values()) p.reject(new Error('verifier pool closed'));
    this.pending.clear();
  }
}
