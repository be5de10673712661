// The package's SimplePool against real relays of three kinds at once: a
// nostrwire relay (nostrwire.v2), a nostrwire relay with the binary
// transport off (JSON), and khatru (another implementation, JSON), holding
// overlapping events; with relays that stall, drop the connection mid-REQ
// or send forged copies; and a small app run with nostr-tools' SimplePool
// and with this package's, its import the only change, against relays set
// up the same way.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket, { WebSocketServer } from 'ws';
import { finalizeEvent, generateSecretKey, getPublicKey, verifyEvent as toolsVerify } from 'nostr-tools/pure';
import * as toolsPool from 'nostr-tools/pool';
import * as ourPool from '../dist/simple-pool.js';
import { useWebSocketImplementation } from '../dist/index.js';
import { haveBinary } from './relay-process.mjs';
import { haveKhatru } from './khatru-process.mjs';
import { scriptedRelayServer } from './scripted-relay.mjs';
import { KINDS, poolEvents, threeRelays } from './pool-relays.mjs';

toolsPool.useWebSocketImplementation(WebSocket);
ourPool.useWebSocketImplementation(WebSocket);
useWebSocketImplementation(WebSocket);
const skip = (!haveBinary && 'no nostrwire binary (set NOSTRWIRE_BIN)') || (!haveKhatru && 'no khatru relay (js/scripts/build-khatru.sh)');

const NEWEST = Math.floor(Date.now() / 1000) - 3600;
const FILTER = { kinds: KINDS, since: NEWEST - 2000, until: NEWEST, limit: 1000 };

let set;
let events = [];
before(async () => {
  if (skip) return;
  events = poolEvents({ count: 200, seed: 45, newest: NEWEST }).events;
  set = await threeRelays(events);
});
after(() => set?.stop());
const ids = (list) => list.map((e) => e.id).sort();

test('three relays, three implementations: each negotiates its own transport, the union arrives once', { skip }, async () => {
  const pool = new ourPool.SimplePool();
  try {
    const got = await pool.querySync(set.urls, { ...FILTER });
    assert.deepEqual(ids(got), ids(events));
    const transports = await Promise.all(set.urls.map(async (u) => (await pool.ensureRelay(u)).transport));
    assert.deepEqual(transports, ['v2', 'json', 'json']);
    assert.deepEqual([...pool.listConnectionStatus().values()], [true, true, true]);
  } finally {
    pool.destroy();
  }
});

test('an event that two relays send is verified once, and the set is nostr-tools\' set', { skip }, async () => {
  const calls = [];
  const verifyEvent = (e, url) => (calls.push([e.id, url]), toolsVerify(e));
  const pool = new ourPool.AbstractSimplePool({ verifyEvent });
  const tools = new toolsPool.SimplePool();
  try {
    // Time enough for nostr-tools to verify every event on a busy machine.
    const params = { maxWait: 60_000 };
    const [ours, theirs] = await Promise.all([pool.querySync(set.urls, { ...FILTER }, params), tools.querySync(set.urls, { ...FILTER }, params)]);
    assert.equal(calls.length, events.length);
    assert.equal(new Set(calls.map(([id]) => id)).size, events.length);
    assert.deepEqual(ids(ours), ids(theirs));
  } finally {
    pool.destroy();
    tools.destroy();
  }
});

test('a relay that stalls and one that drops the connection mid-REQ: the others\' events arrive, oneose and onclose come once', { skip }, async () => {
  const stalled = await scriptedRelayServer(events, { stall: true });
  const dropping = await scriptedRelayServer(events, { closeAfter: 50 });
  const pool = new ourPool.SimplePool();
  try {
    const got = [];
    let eoses = 0;
    // Closed once every event came and oneose fired (the stalled relay's
    // maxWait), whichever is last: on a busy machine a live relay may take
    // longer than maxWait too, and its events still come.
    const reasons = await new Promise((resolve) => {
      const done = () => eoses > 0 && got.length >= events.length && sub.close();
      const sub = pool.subscribeMany([...set.urls, stalled.url, dropping.url], { ...FILTER }, {
        maxWait: 3000,
        onevent: (e) => (got.push(e), done()),
        oneose: () => (eoses++, done()),
        onclose: resolve,
      });
    });
    assert.equal(eoses, 1);
    assert.deepEqual(ids(got), ids(events));
    assert.equal(reasons.length, 5);
    assert.equal(reasons.find((r) => r.url.startsWith(dropping.url)).reason, 'relay connection closed');
    assert.equal(reasons.find((r) => r.url.startsWith(stalled.url)).reason, 'closed by caller');
  } finally {
    pool.destroy();
    await stalled.stop();
    await dropping.stop();
  }
});

test('a forged copy that comes first does not hide the real one from another relay', { skip }, async () => {
  const real = events.slice(0, 5);
  const forged = real.map((e) => ({ ...e, sig: e.sig.replace(/^./, (c) => (c === '0' ? '1' : '0')) }));
  const liar = await scriptedRelayServer(forged);
  const late = await scriptedRelayServer(real, { delay: 300 });
  const pool = new ourPool.SimplePool();
  const tools = new toolsPool.SimplePool();
  try {
    const [ours, theirs] = await Promise.all([
      pool.querySync([liar.url, late.url], { ids: real.map((e) => e.id) }),
      tools.querySync([liar.url, late.url], { ids: real.map((e) => e.id) }),
    ]);
    assert.deepEqual(ids(ours), ids(real));
    // nostr-tools takes the first copy's id as seen before verifying it.
    assert.deepEqual(theirs, []);
  } finally {
    pool.destroy();
    tools.destroy();
    await liar.stop();
    await late.stop();
  }
});

test('a JSON copy of an event the pool already took is dropped unparsed: three relays, each event parsed once', { skip }, async () => {
  const list = events.slice(0, 60);
  const relays = await Promise.all([0, 1, 2].map(() => scriptedRelayServer(list)));
  const pool = new ourPool.SimplePool({ transport: 'json' });
  const parse = JSON.parse;
  let parsed = 0;
  JSON.parse = (text, ...rest) => {
    if (typeof text === 'string' && text.startsWith('["EVENT"')) parsed++;
    return parse(text, ...rest);
  };
  try {
    let copies = 0;
    const got = [];
    await new Promise((resolve) => {
      pool.subscribeManyEose(relays.map((r) => r.url), { ids: list.map((e) => e.id) }, {
        alreadyHaveEvent: () => (copies++, false),
        onevent: (e) => got.push(e),
        onclose: resolve,
      });
    });
    assert.deepEqual(ids(got), ids(list));
    assert.equal(copies, 3 * list.length, 'alreadyHaveEvent still hears of every copy');
    assert.equal(parsed, list.length);
  } finally {
    JSON.parse = parse;
    pool.destroy();
    await Promise.all(relays.map((r) => r.stop()));
  }
});

test('an EVENT whose raw text names another event\'s id before its own cannot hide that event', { skip }, async () => {
  const [real, other] = events;
  // Two "id" keys: the first names the real event, the one JSON.parse keeps names another.
  const text = (sub) => JSON.stringify(['EVENT', sub, other]).replace('{"id":', `{"id":"${real.id}","id":`);
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((r) => server.once('listening', r));
  server.on('connection', (ws) =>
    ws.on('message', (data) => {
      const [type, sub] = JSON.parse(String(data));
      if (type !== 'REQ') return;
      ws.send(text(sub));
      ws.send(JSON.stringify(['EOSE', sub]));
    }),
  );
  const late = await scriptedRelayServer([real], { delay: 300 });
  const pool = new ourPool.SimplePool({ transport: 'json' });
  try {
    const got = await pool.querySync([`ws://127.0.0.1:${server.address().port}`, late.url], { ids: [real.id, other.id] });
    assert.deepEqual(ids(got), ids([real, other]));
  } finally {
    pool.destroy();
    server.close();
    for (const c of server.clients) c.terminate();
    await late.stop();
  }
});

test('onauth: a REQ closed with auth-required: is sent again once after AUTH', { skip }, async () => {
  const sk = generateSecretKey();
  const dm = finalizeEvent({ kind: 4, created_at: Math.floor(Date.now() / 1000), tags: [['p', getPublicKey(sk)]], content: 'secret' }, sk);
  const pool = new ourPool.SimplePool();
  const url = set.urls[0];
  try {
    assert.equal(await pool.publish([url], dm)[0], '');
    const query = (params) =>
      new Promise((resolve) => {
        const got = [];
        pool.subscribeEose([url], { kinds: [4], authors: [dm.pubkey] }, { ...params, onevent: (e) => got.push(e), onclose: (r) => resolve({ got, r }) });
      });
    const refused = await query({});
    assert.deepEqual(refused.got, []);
    assert.match(refused.r[0].reason, /^auth-required: /);
    const authed = await query({ onauth: async (t) => finalizeEvent(t, sk) });
    assert.deepEqual(ids(authed.got), [dm.id]);
    assert.equal(authed.r[0].reason, 'closed automatically on eose');
  } finally {
    pool.destroy();
  }
});

// A small app: publishes, reads back, waits for a live event. Only its
// import changes between the two runs.
async function app({ SimplePool }, urls, sk) {
  const pool = new SimplePool();
  const at = NEWEST + 100;
  const notes = [0, 1, 2].map((i) => finalizeEvent({ kind: 1, created_at: at + i, tags: [['t', 'pool45']], content: `note ${i}` }, sk));
  const settle = async (ps) => (await Promise.allSettled(ps)).map((s) => (s.status === 'fulfilled' ? ['ok', s.value] : ['rejected', String(s.reason)]));
  const out = {};
  out.published = await settle(notes.flatMap((n) => pool.publish(urls, n)));
  out.again = await settle(pool.publish(urls, notes[0]));
  out.duplicateUrl = await settle(pool.publish([urls[0], urls[0]], notes[1]));
  out.query = ids(await pool.querySync(urls, { '#t': ['pool45'] }));
  out.get = (await pool.get(urls, { '#t': ['pool45'] }))?.id;
  out.shared = ids(await pool.querySync(urls, { ...FILTER }, { maxWait: 60_000 }));
  const live = finalizeEvent({ kind: 1, created_at: at + 10, tags: [['t', 'pool45-live']], content: 'live' }, sk);
  out.live = await new Promise((resolve) => {
    let eoses = 0;
    let sent;
    const sub = pool.subscribeMany(urls, { '#t': ['pool45-live'] }, {
      oneose: () => {
        eoses++;
        sent = settle(pool.publish(urls.slice(1), live));
      },
      onevent: async (e) => {
        sub.close();
        resolve({ id: e.id, eoses, sent: await sent });
      },
    });
  });
  out.status = [...pool.listConnectionStatus().entries()].map(([u, c]) => [urls.findIndex((x) => u.startsWith(x)), c]);
  pool.destroy();
  return out;
}

test('an app moved from nostr-tools\' SimplePool by its import alone: the same events and OK results', { skip }, async () => {
  const sk = generateSecretKey();
  const results = [];
  for (const mod of [toolsPool, ourPool]) {
    const relays = await threeRelays(events);
    try {
      results.push(await app(mod, relays.urls, sk));
    } finally {
      await relays.stop();
    }
  }
  const [theirs, ours] = results;
  assert.equal(theirs.published.length, 9);
  assert.ok(theirs.published.every(([s]) => s === 'ok'));
  assert.match(theirs.again[0][1], /^duplicate:/);
  assert.deepEqual(theirs.shared, ids(events));
  assert.deepEqual(ours, theirs);
});
