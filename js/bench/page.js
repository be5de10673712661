// The browser benchmark page: one REQ per page load, timed in the page.
//   tools       nostr-tools Relay, its verifyEvent (@noble/curves), JSON
//   tools-wasm  nostr-tools AbstractRelay with nostr-wasm's verifyEvent, JSON
//   ours        this package's Relay over `transport` (json | binary)
//   ours-unverified  the same without signature checks
//   ours-workers-N   the same, verifying in N Web Workers
//   raw-v2      the host's floor for nostrwire.v2: a plain WebSocket doing
//               on the wire what the package does (`window.rawV2`), frames
//               counted, nothing decoded
// and `window.floor`: the time to verify events already in memory, no
// network (the verification floor of each client, in the same page).
import { Relay as ToolsRelay } from 'nostr-tools/relay';
import { AbstractRelay } from 'nostr-tools/abstract-relay';
import { setNostrWasm, verifyEvent as toolsWasmVerify } from 'nostr-tools/wasm';
import { verifyEvent as toolsNobleVerify } from 'nostr-tools/pure';
import { initNostrWasm } from 'nostr-wasm';
import { Relay, SUBPROTOCOL_V2, holdFrame, initVerifier, jsonFrame, verifyEvents } from '../src/index.ts';
import { VerifierPool } from '../src/pool.ts';
import { FRAME_BATCH, FRAME_DICTIONARY_SET, FRAME_EOSE, FRAME_JSON } from '../src/transport.ts';
import { dictionarySet } from '../src/dictionaries.ts';

// Every WebSocket the page opens reports when EOSE arrives and how many
// message bytes it delivered (after permessage-deflate; socket bytes are
// counted by the proxy in front of the relay).
const probe = { eoseAt: 0, firstAt: 0, armed: false, messageBytes: 0, messages: 0 };
const Native = WebSocket;
window.WebSocket = class extends Native {
  constructor(...args) {
    super(...args);
    this.addEventListener('message', (ev) => {
      probe.messages++;
      if (probe.armed && !probe.firstAt) probe.firstAt = performance.now();
      const d = ev.data;
      if (typeof d === 'string') {
        probe.messageBytes += d.length;
        if (d.startsWith('["EOSE"')) probe.eoseAt = performance.now();
      } else {
        const b = new Uint8Array(d);
        probe.messageBytes += b.length;
        if (b[0] === 0x05 || (b[0] === 0x00 && b[2] === 0x45 && b[3] === 0x4f)) probe.eoseAt = performance.now();
      }
    });
  }
};

const longTasks = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) longTasks.push(e.duration);
}).observe({ type: 'longtask', buffered: true });

function heap() {
  return performance.memory ? performance.memory.usedJSHeapSize : 0;
}

async function connect(client, url, transport) {
  if (client === 'tools') {
    const r = await ToolsRelay.connect(url);
    return r;
  }
  if (client === 'tools-wasm') {
    setNostrWasm(await initNostrWasm());
    return AbstractRelay.connect(url, { verifyEvent: toolsWasmVerify });
  }
  // The probing WebSocket above: the package took the global one when it
  // was imported, before this page replaced it.
  const websocketImplementation = window.WebSocket;
  if (client === 'ours-unverified') return Relay.connect(url, { transport, verifyEvent: false, websocketImplementation });
  if (client.startsWith('ours-workers-')) {
    return Relay.connect(url, { transport, workers: Number(client.slice(13)), websocketImplementation });
  }
  await initVerifier();
  return Relay.connect(url, { transport, websocketImplementation });
}

// The floor of nostrwire.v2 delivery on this host: a plain WebSocket (the
// probing one, as the package's rows get) offering `nostrwire.v2` and
// doing on the wire what `Relay.connect` does before its first REQ: wait
// for the relay's dictionary set (0x07), take it up (from memory, the
// Cache API or the relay, before the clock) and say so (0x08, the package's
// own frame encoder), then send the same REQ as the package (a 0x00 frame).
// Timed from the REQ sent to its EOSE frame received; in between each
// message is counted and its bytes summed, and only its type byte is read.
window.rawV2 = async ({ url, limit, filter }) => {
  if (window.gc) window.gc();
  const connectStart = performance.now();
  const ws = new window.WebSocket(url, [SUBPROTOCOL_V2]);
  ws.binaryType = 'arraybuffer';
  const first = await new Promise((resolve, reject) => {
    ws.onerror = ws.onclose = () => reject(new Error(`connection to ${url} failed`));
    ws.onmessage = (ev) => resolve(ev.data);
  });
  if (ws.protocol !== SUBPROTOCOL_V2) throw new Error(`relay chose ${ws.protocol || 'JSON'}, not ${SUBPROTOCOL_V2}`);
  const set = new Uint8Array(first);
  if (set[0] !== FRAME_DICTIONARY_SET) throw new Error(`first frame has type ${set[0]}, not the dictionary set`);
  if (set.length === 33) {
    const hash = Array.from(set.subarray(1), (b) => b.toString(16).padStart(2, '0')).join('');
    await dictionarySet(url, hash);
    ws.send(holdFrame([hash]));
  }
  const connectMs = performance.now() - connectStart;
  longTasks.length = 0;
  const result = await new Promise((resolve) => {
    let messages = 0;
    let batches = 0;
    let bytes = 0;
    let firstAt = 0;
    let start = 0;
    ws.onmessage = (ev) => {
      const now = performance.now();
      const frame = new Uint8Array(ev.data);
      messages++;
      bytes += frame.length;
      if (!firstAt) firstAt = now;
      const type = frame[0];
      if (type === FRAME_BATCH) batches++;
      // EOSE is 0x05; a JSON frame (0x00) carries CLOSED or NOTICE, which
      // would end the REQ too.
      else if (type === FRAME_EOSE || type === FRAME_JSON) {
        resolve({ eoseMs: now - start, firstMessageMs: firstAt - start, messages, batches, frameBytes: bytes, endFrame: type });
      }
    };
    // The package's first subscription id, so each batch is the same size.
    start = performance.now();
    ws.send(jsonFrame(['REQ', 'sub:1', { ...filter, limit }]));
  });
  await new Promise((r) => setTimeout(r, 100));
  ws.close();
  return {
    ...result,
    events: null,
    // No onevent here: the floor's "last event" is the EOSE frame.
    lastVerifiedMs: result.eoseMs,
    eoseCallbackMs: result.eoseMs,
    transport: 'v2',
    connectMs,
    messageBytes: probe.messageBytes,
    longTasks: longTasks.length,
    longTaskMs: longTasks.reduce((a, b) => a + b, 0),
    peakHeapBytes: heap(),
    heapBeforeBytes: 0,
  };
};

window.run = async ({ client, url, transport, limit, filter }) => {
  if (client === 'raw-v2') return window.rawV2({ url, limit, filter });
  if (window.gc) window.gc();
  const heapBefore = heap();
  // connect: from the call to the relay being ready (for v2, its
  // dictionary set taken up).
  const connectStart = performance.now();
  const relay = await connect(client, url, transport);
  const connectMs = performance.now() - connectStart;
  const negotiated = relay.transport ?? 'json';
  // bench-browser --profile: the profile covers the REQ, not the connection.
  if (window.profileStart) await window.profileStart();
  longTasks.length = 0;
  let peakHeap = heap();
  const result = await new Promise((resolve) => {
    let n = 0;
    let last = 0;
    probe.armed = true;
    const start = performance.now();
    const sub = relay.subscribe([{ ...filter, limit }], {
      eoseTimeout: 600000,
      onevent() {
        n++;
        last = performance.now();
        // Every 1,024 events: reading the heap size costs about 0.1 ms here
        // (every 128, it took 10-20 ms of a 10,000-event run).
        if ((n & 1023) === 0) peakHeap = Math.max(peakHeap, heap());
      },
      oneose() {
        const done = performance.now();
        peakHeap = Math.max(peakHeap, heap());
        sub.close();
        resolve({
          events: n,
          eoseMs: (probe.eoseAt || done) - start,
          firstMessageMs: probe.firstAt ? probe.firstAt - start : null,
          eoseCallbackMs: done - start,
          lastVerifiedMs: last - start,
        });
      },
    });
  });
  // Let the observer deliver the last long task entries.
  await new Promise((r) => setTimeout(r, 100));
  relay.close();
  return {
    ...result,
    transport: negotiated,
    connectMs,
    messageBytes: probe.messageBytes,
    longTasks: longTasks.length,
    longTaskMs: longTasks.reduce((a, b) => a + b, 0),
    peakHeapBytes: peakHeap,
    heapBeforeBytes: heapBefore,
  };
};

// The verification floor: fetches the REQ's events without verifying them,
// then times one verifier over fresh copies of them (parsed before the
// clock starts, so no verdict is cached), in this page, with no network.
//   noble       nostr-tools' verifyEvent (@noble/curves), main thread: (a)
//   tools-wasm  nostr-tools/wasm's verifyEvent (nostr-wasm), main thread: (b)
//   ours        this package's verifyEvents, main thread in slices: (c), (d)
//   id-hash     nostr-wasm with every id altered, so each check ends after
//               the id hash, before the signature: the id's share
//   pool-N      this package's VerifierPool with N workers, batches as the
//               Relay sends them: (g), (h)
window.floor = async ({ method, url, limit, filter }) => {
  const relay = await Relay.connect(url, { transport: 'json', verifyEvent: false });
  const texts = await new Promise((resolve) => {
    const got = [];
    const sub = relay.subscribe([{ ...filter, limit }], {
      eoseTimeout: 600000,
      onevent(e) {
        got.push(JSON.stringify(e));
      },
      oneose() {
        sub.close();
        resolve(got);
      },
    });
  });
  relay.close();
  const events = texts.map((t) => JSON.parse(t));
  if (method === 'id-hash') for (const e of events) e.id = (e.id[0] === '0' ? '1' : '0') + e.id.slice(1);
  let pool = null;
  let startMs = 0;
  if (method === 'tools-wasm' || method === 'id-hash') setNostrWasm(await initNostrWasm());
  if (method === 'ours') await initVerifier();
  // pool-N, or pool-N-B for batches of B events instead of 64.
  const [, workers, batchSize = 64] = method.split('-').map(Number);
  if (method.startsWith('pool-')) {
    const n = workers;
    const t = performance.now();
    pool = new VerifierPool(n, new URL('verify-worker.js', location.href));
    // Every worker started and its verifier loaded before the clock starts.
    const warm = JSON.parse(texts[0]);
    await Promise.all(Array.from({ length: n }, () => pool.verify([warm])));
    startMs = performance.now() - t;
  }
  if (window.gc) window.gc();
  await new Promise((r) => setTimeout(r, 50));
  longTasks.length = 0;
  let verdicts;
  const start = performance.now();
  if (method === 'noble') verdicts = events.map((e) => toolsNobleVerify(e));
  else if (method === 'tools-wasm' || method === 'id-hash') verdicts = events.map((e) => toolsWasmVerify(e));
  else if (method === 'ours') verdicts = await verifyEvents(events);
  else {
    const batches = [];
    for (let i = 0; i < events.length; i += batchSize) batches.push(pool.verify(events.slice(i, i + batchSize)));
    verdicts = (await Promise.all(batches)).flat();
  }
  const ms = performance.now() - start;
  pool?.close();
  await new Promise((r) => setTimeout(r, 100));
  return {
    events: events.length,
    valid: verdicts.filter((v) => v === true).length,
    verifyMs: ms,
    workerStartMs: startMs,
    longTasks: longTasks.length,
    longTaskMs: longTasks.reduce((a, b) => a + b, 0),
  };
};
window.ready = true;
