// nostr-tools' own pool tests (pool.test.ts of nostr-tools 2.24.3, released
// into the public domain under the Unlicense), adapted from bun:test to
// node:test and from mock-socket to `ws` servers on loopback
// (test/nostr-tools/): each case runs against nostr-tools' SimplePool (npm)
// and against this package's, with the same assertions. What changed in a
// case, and the cases that cannot apply, are said where they are; the list
// is in README.md ("nostr-tools' pool tests").
import { test, beforeEach, afterEach } from 'node:test';
import WebSocket, { WebSocketServer } from 'ws';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import { SimplePool as ToolsPool, useWebSocketImplementation as useToolsWebSocket } from 'nostr-tools/pool';
import { SimplePool as OurPool, useWebSocketImplementation } from '../dist/simple-pool.js';
import { startMockRelay } from './nostr-tools/mock-relay.mjs';
import { expect } from './nostr-tools/expect.mjs';
import { freePort } from './relay-process.mjs';

useToolsWebSocket(WebSocket);
useWebSocketImplementation(WebSocket);

const hexToBytes = (hex) => Uint8Array.from(hex.match(/../g), (b) => parseInt(b, 16));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

for (const [name, SimplePool] of [
  ['nostr-tools', ToolsPool],
  ['nostrwire', OurPool],
]) {
  let pool;
  let mockRelays;
  let relayURLs;

  beforeEach(async () => {
    pool = new SimplePool();
    mockRelays = await Promise.all(Array.from({ length: 10 }, () => startMockRelay()));
    relayURLs = mockRelays.map((mr) => mr.url);
  });

  afterEach(async () => {
    pool.close(relayURLs);
    pool.destroy();
    await Promise.all(mockRelays.map((mr) => mr.close()));
  });

  test(`${name}: removing duplicates when subscribing`, async () => {
    let priv = generateSecretKey();
    let pub = getPublicKey(priv);
    let received = [];
    let event = finalizeEvent({ created_at: Math.round(Date.now() / 1000), content: 'test', kind: 22345, tags: [] }, priv);

    pool.subscribeMany(
      relayURLs,
      { authors: [pub] },
      {
        onevent(event) {
          received.push(event);
        },
      },
    );

    await Promise.any(pool.publish(relayURLs, event));
    await sleep(200);

    expect(received).toHaveLength(1);
    expect(received[0]).toEqual(event);
  });

  test(`${name}: same with double subs`, async () => {
    let priv = generateSecretKey();
    let pub = getPublicKey(priv);
    let received = [];

    pool.subscribeMany(relayURLs, { authors: [pub] }, { onevent: (event) => received.push(event) });
    pool.subscribeMany(relayURLs, { authors: [pub] }, { onevent: (event) => received.push(event) });

    let event = finalizeEvent({ created_at: Math.round(Date.now() / 1000), content: 'test2', kind: 22346, tags: [] }, priv);

    await Promise.any(pool.publish(relayURLs, event));
    await sleep(200);

    expect(received).toHaveLength(2);
  });

  test(`${name}: subscribe many map`, async () => {
    let priv = hexToBytes('8ea002840d413ccdd5be98df5dd89d799eaa566355ede83ca0bbdbb4b145e0d3');
    let pub = getPublicKey(priv);
    let received = [];
    let event1 = finalizeEvent({ created_at: Math.round(Date.now() / 1000), content: 'test1', kind: 20001, tags: [] }, priv);
    let event2 = finalizeEvent({ created_at: Math.round(Date.now() / 1000), content: 'test2', kind: 20002, tags: [['t', 'biloba']] }, priv);
    let event3 = finalizeEvent({ created_at: Math.round(Date.now() / 1000), content: 'test3', kind: 20003, tags: [['t', 'biloba']] }, priv);

    const [relayA, relayB, relayC] = relayURLs;

    pool.subscribeMap(
      [
        { url: relayA, filter: { authors: [pub], kinds: [20001] } },
        { url: relayB, filter: { authors: [pub], kinds: [20002] } },
        { url: relayC, filter: { kinds: [20003], '#t': ['biloba'] } },
      ],
      { onevent: (event) => received.push(event) },
    );

    await Promise.all(pool.publish([relayA, relayB], event1));
    await sleep(100);
    expect(received).toHaveLength(1);
    expect(received[0]).toEqual(event1);

    await pool.publish([relayB], event2)[0];
    await sleep(100);
    expect(received).toHaveLength(2);
    expect(received[1]).toEqual(event2);

    await Promise.all([
      ...pool.publish([relayA, relayB], event3),
      ...pool.publish([relayA, relayB, relayC], event1),
      pool.publish([relayA, relayB, relayC], event2),
    ]);
    await sleep(100);
    expect(received).toHaveLength(2);

    await pool.publish([relayC], event3)[0];
    await sleep(100);
    expect(received).toHaveLength(3);
    expect(received[2]).toEqual(event3);
  });

  test(`${name}: query a bunch of events and cancel on eose`, async () => {
    let events = new Set();
    await new Promise((resolve) => {
      pool.subscribeManyEose(
        relayURLs,
        { kinds: [0, 1, 2, 3, 4, 5, 6], limit: 40 },
        { onevent: (event) => events.add(event.id), onclose: resolve },
      );
    });
    expect(events.size).toBeGreaterThan(50);
  });

  test(`${name}: querySync()`, async () => {
    let authors = mockRelays.flatMap((mr) => mr.authors);
    let events = await pool.querySync(relayURLs, { authors, kinds: [1], limit: 2 });
    const uniqueEventCount = new Set(events.map((evt) => evt.id)).size;
    expect(events.length).toBeGreaterThan(2);
    expect(events).toHaveLength(uniqueEventCount);
  });

  test(`${name}: get()`, async () => {
    let ids = mockRelays.flatMap((mr) => mr.ids);
    let event = await pool.get(relayURLs, { ids: [ids[0]] });
    expect(event).not.toBeNull();
    expect(event).toHaveProperty('id', ids[0]);
  });

  // nostr-tools over Node's `ws` pings at the WebSocket level, which `ws`
  // answers even while the relay answers nothing else, and starts its timer
  // at connection with the frequency then set: the case runs against this
  // package's pool only, whose ping is a REQ (as nostr-tools' is in
  // browsers) and reads the frequency before each.
  test(`${name}: ping-pong timeout in pool`, { skip: name === 'nostr-tools' && 'protocol-level ping over ws (see above)' }, async () => {
    const mockRelay = mockRelays[0];
    pool = new SimplePool({ enablePing: true });
    const relay = await pool.ensureRelay(mockRelay.url);
    relay.pingTimeout = 50;
    relay.pingFrequency = 50;

    let closed = false;
    const closedPromise = new Promise((resolve) => {
      relay.onclose = () => {
        closed = true;
        resolve();
      };
    });

    expect(relay.connected).toBeTrue();

    // wait for the first ping to succeed
    await sleep(75);
    expect(closed).toBeFalse();

    // now make it unresponsive
    mockRelay.unresponsive = true;

    // wait for the second ping to fail
    await closedPromise;

    expect(relay.connected).toBeFalse();
    expect(closed).toBeTrue();
  });

  test(`${name}: reconnect on disconnect in pool`, async () => {
    const mockRelay = mockRelays[0];
    pool = new SimplePool({ enableReconnect: true });
    const relay = await pool.ensureRelay(mockRelay.url);
    relay.resubscribeBackoff = [50, 100];

    let closes = 0;
    relay.onclose = () => {
      closes++;
    };

    expect(relay.connected).toBeTrue();
    relay.ws?.close();

    await waitUntil(() => !relay.connected, 'relay never disconnected');
    expect(relay.connected).toBeFalse();
    expect(closes).toBe(0);

    await waitUntil(() => relay.connected, 'relay never reconnected');
    expect(relay.connected).toBeTrue();
    expect(closes).toBe(0);
  });

  test(`${name}: reconnect with filter update in pool`, async () => {
    const mockRelay = mockRelays[0];
    pool = new SimplePool({ enableReconnect: true });
    const relay = await pool.ensureRelay(mockRelay.url);
    relay.resubscribeBackoff = [50, 100];

    let closes = 0;
    relay.onclose = () => {
      closes++;
    };

    expect(relay.connected).toBeTrue();

    const sub = relay.subscribe([{ kinds: [1], since: 0 }], { onevent: () => {} });
    expect(sub.filters[0].since).toBe(0);

    await sleep(50);
    expect(closes).toBe(0);

    relay.ws?.close();

    await waitUntil(() => !relay.connected, 'relay never disconnected');
    expect(relay.connected).toBeFalse();
    expect(closes).toBe(0);

    await waitUntil(() => relay.connected, 'relay never reconnected');
    expect(relay.connected).toBeTrue();
    expect(closes).toBe(0);

    expect(sub.filters[0].since).toBeGreaterThan(1);
  });

  test(`${name}: track relays when publishing`, async () => {
    let event1 = finalizeEvent({ kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content: 'hello' }, generateSecretKey());
    let event2 = finalizeEvent({ kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content: 'hello' }, generateSecretKey());

    pool.trackRelays = true;
    await Promise.all(pool.publish(relayURLs, event1));
    expect(pool.seenOn.get(event1.id)).toBeDefined();
    expect(Array.from(pool.seenOn.get(event1.id)).map((r) => r.url)).toEqual(expect.arrayContaining(relayURLs));

    pool.trackRelays = false;
    await Promise.all(pool.publish(relayURLs, event2));
    expect(pool.seenOn.get(event2.id)).toBeUndefined();
  });

  // Adapted: a loopback port nothing listens on stands for the original's
  // unresolvable host (no name lookup in tests).
  test(`${name}: publish() rejects (does not resolve) when a relay is unreachable`, async () => {
    let event = finalizeEvent({ kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content: 'hello' }, generateSecretKey());
    const unreachable = `ws://127.0.0.1:${await freePort()}/nothing`;
    const [settled] = await Promise.allSettled(pool.publish([unreachable], event));
    expect(settled.status).toBe('rejected');
    expect(String(settled.reason)).toContain('connection failure');
  });

  // Adapted: the original hands the event to the relay's internals
  // (`prepareSubscription`, `_onmessage`); here a relay sends it to a
  // subscription through the pool.
  test(`${name}: oninvalidevent is called through the pool for invalid events`, async () => {
    const sk = generateSecretKey();
    const wrongFieldTypeEvent = finalizeEvent({ kind: 1, content: 'hello', created_at: Math.floor(Date.now() / 1000), tags: [] }, sk);
    wrongFieldTypeEvent.kind = '1';
    const mockRelay = await startMockRelay({ extra: [wrongFieldTypeEvent] });
    try {
      const invalid = await new Promise((resolve) => {
        const sub = pool.subscribeMany([mockRelay.url], { kinds: [1] }, {
          oninvalidevent(event) {
            sub.close();
            resolve(event);
          },
        });
      });
      expect(invalid.kind).toBe('1');
    } finally {
      pool.close([mockRelay.url]);
      await mockRelay.close();
    }
  });
}

async function waitUntil(check, message) {
  for (let waited = 0; !check(); waited += 10) {
    if (waited > 2000) throw new Error(message);
    await sleep(10);
  }
}

// Not in nostr-tools' pool tests: `countMany` (NIP-45) of both pools
// against the same three relays, each answering COUNT with its own count
// and HyperLogLog registers (one with registers of the wrong length).
test('countMany: the same filter sent, the same count and merged registers as nostr-tools\'', async () => {
  const registers = [0, 1, 2].map((r) => Array.from({ length: 256 }, (_, i) => (i * 7 + r * 13) % 23));
  const answers = [
    { count: 12, hll: registers[0].map((b) => b.toString(16).padStart(2, '0')).join('') },
    { count: 30, hll: registers[1].map((b) => b.toString(16).padStart(2, '0')).join('') },
    { count: 41, hll: 'ab' },
  ];
  const asked = [];
  const servers = await Promise.all(
    answers.map(async (answer) => {
      const server = new WebSocketServer({ host: '127.0.0.1', port: 0, handleProtocols: () => false });
      await new Promise((r) => server.once('listening', r));
      server.on('connection', (conn) =>
        conn.on('message', (m) => {
          const [type, id, ...filters] = JSON.parse(String(m));
          if (type !== 'COUNT') return;
          asked.push(filters);
          conn.send(JSON.stringify(['COUNT', id, answer]));
        }),
      );
      return server;
    }),
  );
  const urls = servers.map((s) => `ws://127.0.0.1:${s.address().port}/`);
  const target = 'e'.repeat(64);
  const results = [];
  try {
    for (const Pool of [ToolsPool, OurPool]) {
      const pool = new Pool();
      try {
        results.push(await pool.countMany(urls, target, 'reactions'));
      } finally {
        pool.destroy();
      }
    }
  } finally {
    for (const s of servers) {
      for (const c of s.clients) c.terminate();
      s.close();
    }
  }
  const merged = registers[0].map((b, i) => Math.max(b, registers[1][i]).toString(16).padStart(2, '0')).join('');
  expect(results[1]).toEqual({ count: 41, hll: merged });
  expect(results[1]).toEqual(results[0]);
  expect(asked).toHaveLength(6);
  for (const filters of asked) expect(filters).toEqual([{ '#e': [target], kinds: [7] }]);
});
