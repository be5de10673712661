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
window.WebSocket = class extends Native {
  constructor(...args) {
    super(...args);
    this.addEventListener('message', (ev) => {
      probe.messages++;
      probe.bytes += typeof ev.data === 'string' ? ev.data.length : ev.data.byteLength;
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

window.ready = true;
