// A page that reads one filter from several relays at once through a pool
// (`window.poolRun`), for the multi-relay test in Chromium and the pool
// rows of the browser benchmark:
//   tools-wasm      nostr-tools' AbstractSimplePool with nostr-wasm's verifyEvent
//   ours            this package's SimplePool, verifying on the main thread
//   ours-workers-2  the same with two verifier workers shared by every relay
import { AbstractSimplePool as ToolsPool } from 'nostr-tools/abstract-pool';
import { setNostrWasm, verifyEvent as toolsWasmVerify } from 'nostr-tools/wasm';
import { initNostrWasm } from 'nostr-wasm';
import { initVerifier } from '../../src/index.ts';
import { SimplePool } from '../../src/simple-pool.ts';

// Every WebSocket the page opens counts the message bytes it delivered
// (after permessage-deflate).
const probe = { bytes: 0, messages: 0 };
const Native = WebSocket;
// With `probe.onmessage`, each message's URL is told as it is dispatched.
window.WebSocket = class extends Native {
  constructor(...args) {
    super(...args);
    this.addEventListener('message', (ev) => {
      probe.messages++;
      probe.bytes += typeof ev.data === 'string' ? ev.data.length : ev.data.byteLength;
      probe.onmessage?.(this.url);
    });
  }
};

const longTasks = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) longTasks.push(e.duration);
}).observe({ type: 'longtask', buffered: true });

/**
 * Connects `client`'s pool to `urls` (timed apart), then one
 * `subscribeMany` of `filter`, closed at the pool's `oneose` or, with
 * `expect`, once that many events were handed on (and `oneose` came, with
 * `waitForEose`). Returns the
 * ids handed to `onevent` in order, when the last came, how many copies the
 * relays delivered and how many events were verified, each relay's
 * transport and `onclose` reason, the long tasks, and the bytes.
 */
window.poolRun = async ({ client, urls, filter, maxWait = 4400, expect = Infinity, waitForEose = false }) => {
  let verified = 0;
  let pool;
  if (client === 'tools-wasm') {
    setNostrWasm(await initNostrWasm());
    pool = new ToolsPool({
      verifyEvent: (e) => (verified++, toolsWasmVerify(e)),
      websocketImplementation: window.WebSocket,
    });
  } else {
    await initVerifier();
    pool = new SimplePool({ websocketImplementation: window.WebSocket, workers: client === 'ours-workers-2' ? 2 : 0 });
  }
  const c0 = performance.now();
  const relays = await Promise.all(urls.map((u) => pool.ensureRelay(u).catch(() => null)));
  const connectMs = performance.now() - c0;
  const transports = relays.map((r) => (r ? (r.transport ?? 'json') : null));
  await new Promise((r) => setTimeout(r, 50));
  longTasks.length = 0;
  probe.bytes = probe.messages = 0;
  const ids = [];
  let delivered = 0;
  let invalid = 0;
  let eoses = 0;
  let last = 0;
  let eoseAt = 0;
  const t0 = performance.now();
  window.poolProgress = () => ({ events: ids.length, delivered, invalid, eoses });
  const reasons = await new Promise((resolve) => {
    const sub = pool.subscribeMany(urls, filter, {
      maxWait,
      alreadyHaveEvent: () => {
        delivered++;
        return false;
      },
      onevent: (e) => {
        ids.push(e.id);
        last = performance.now();
        if (ids.length === expect && (eoses > 0 || !waitForEose)) sub.close();
      },
      oninvalidevent: (e, reason) => {
        if (reason !== 'unmatched') invalid++;
      },
      oneose: () => {
        eoses++;
        eoseAt = performance.now();
        if (!waitForEose || ids.length >= expect) sub.close();
      },
      onclose: resolve,
    });
  });
  await new Promise((r) => setTimeout(r, 100));
  pool.destroy();
  return {
    ids,
    eoses,
    reasons: reasons.map((r) => r.reason),
    transports,
    connectMs,
    lastEventMs: last - t0,
    eoseMs: eoseAt - t0,
    delivered,
    // nostr-tools: calls of its verifier; ours: the events handed on or
    // refused as invalid (each went through the verifier once).
    verified: client === 'tools-wasm' ? verified : ids.length + invalid,
    longTasks: longTasks.filter((d) => d > 50).length,
    longestTaskMs: Math.max(0, ...longTasks),
    messageBytes: probe.bytes,
    messages: probe.messages,
  };
};

/**
 * The floor: the fastest a client could see the relays' answers. One raw
 * WebSocket per relay (`protocols[i]`: 'nostrwire.v2' or none, as the
 * package's pool negotiates; a v2 relay's dictionary set is declared held,
 * so it sends the same compressed records), connected first; then one REQ
 * of `filter` to each of `urls` at once, and each relay's messages counted,
 * unparsed and unverified, until its EOSE. Returns, per relay, the
 * milliseconds from the REQs to its EOSE, its messages and bytes.
 */
window.floorRun = async ({ urls, protocols, filter }) => {
  const sockets = await Promise.all(
    urls.map(
      (url, i) =>
        new Promise((resolve, reject) => {
          const ws = protocols[i] ? new window.WebSocket(url, protocols[i]) : new window.WebSocket(url);
          ws.binaryType = 'arraybuffer';
          ws.onerror = () => reject(new Error(`floor: ${url} failed`));
          if (!protocols[i]) ws.onopen = () => resolve(ws);
          // nostrwire.v2 names its dictionary set first: held (0x08).
          else
            ws.onmessage = (ev) => {
              const b = new Uint8Array(ev.data);
              if (b[0] !== 0x07) return;
              if (b.length === 33) ws.send(Uint8Array.of(0x08, ...b.subarray(1)));
              resolve(ws);
            };
        }),
    ),
  );
  await new Promise((r) => setTimeout(r, 50));
  const json = JSON.stringify(['REQ', 'floor', filter]);
  const req = new TextEncoder().encode(' ' + json);
  req[0] = 0x00;
  const t0 = performance.now();
  const results = await Promise.all(
    sockets.map(
      (ws) =>
        new Promise((resolve) => {
          let messages = 0;
          let bytes = 0;
          ws.onmessage = (ev) => {
            messages++;
            const d = ev.data;
            let eose;
            if (typeof d === 'string') {
              bytes += d.length;
              eose = d.startsWith('["EOSE"');
            } else {
              bytes += d.byteLength;
              eose = new Uint8Array(d, 0, 1)[0] === 0x05;
            }
            if (eose) resolve({ eoseMs: performance.now() - t0, messages, bytes });
          };
          ws.send(ws.protocol ? req : json);
        }),
    ),
  );
  for (const ws of sockets) ws.close();
  return results;
};

// Verifier workers the page starts report, for `floodRun`, how many
// events each held (posted, not answered yet) when a batch with one of
// `workerProbe.honest`'s ids was posted to it.
const workerProbe = { honest: null, ahead: [] };
const NativeWorker = window.Worker;
window.Worker = class extends NativeWorker {
  constructor(...args) {
    super(...args);
    this.held = 0;
    this.addEventListener('message', (ev) => (this.held -= ev.data.verdicts.length));
  }
  postMessage(data, transfer) {
    const items = data.events?.map((e) => e.id) ?? data.messages ?? [];
    if (workerProbe.honest && items.some((x) => [...workerProbe.honest].some((id) => x.includes(id)))) workerProbe.ahead.push(this.held);
    this.held += items.length;
    return super.postMessage(data, transfer);
  }
};

/**
 * Fairness: one pool reads `filter` from a relay that floods it with
 * events that do not verify (`floodUrl`) and from an honest one
 * (`honestUrl`) that answers a little later. Counts, in turns of work
 * rather than time, how long the honest relay's events waited: for each,
 * how many of the flood's events the pool had refused as invalid when its
 * message reached the page, and when it was handed to `onevent`. Resolves
 * at the pool's `oneose` (both relays sent EOSE and all was delivered).
 * With workers, also how many events the worker held, ahead of it, when
 * each batch of the honest relay's events (`honestIds`) was posted.
 */
window.floodRun = async ({ floodUrl, honestUrl, filter, honestIds, workers = 0 }) => {
  workerProbe.honest = new Set(honestIds);
  workerProbe.ahead = [];
  await initVerifier();
  const pool = new SimplePool({ websocketImplementation: window.WebSocket, workers });
  await Promise.all([pool.ensureRelay(floodUrl), pool.ensureRelay(honestUrl)]);
  let invalid = 0;
  const arrived = [];
  const delivered = [];
  const honestWs = new URL(honestUrl).href;
  probe.onmessage = (url) => {
    if (url === honestWs) arrived.push(invalid);
  };
  await new Promise((resolve) => {
    const sub = pool.subscribeMany([floodUrl, honestUrl], filter, {
      maxWait: 60_000,
      onevent: () => delivered.push(invalid),
      oninvalidevent: (e, reason) => {
        if (reason === 'invalid') invalid++;
      },
      oneose: () => resolve(sub.close()),
    });
  });
  probe.onmessage = null;
  workerProbe.honest = null;
  pool.destroy();
  return { arrived, delivered, invalid, aheadInWorkers: workerProbe.ahead };
};

window.ready = true;
