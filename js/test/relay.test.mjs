// The Relay client against a live `nostrwire relay`, over both transports,
// and the fallback to JSON when the relay has the binary transport off.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { generateSecretKey, getPublicKey, finalizeEvent } from 'nostr-tools/pure';
import { Relay as ToolsRelay, useWebSocketImplementation as useToolsWebSocket } from 'nostr-tools/relay';
import { Relay, useWebSocketImplementation, verifiedSymbol, DEFAULT_LIMITS } from '../dist/index.js';
import { startRelay, haveBinary } from './relay-process.mjs';
import { scriptedRelay } from './scripted-relay.mjs';

useWebSocketImplementation(WebSocket);
useToolsWebSocket(WebSocket);
const skip = !haveBinary && 'no nostrwire binary (set NOSTRWIRE_BIN)';

let relay, jsonOnly;
before(async () => {
  if (skip) return;
  relay = await startRelay();
  jsonOnly = await startRelay({ config: '[websocket]\nbinary = false\n' });
});
after(async () => {
  await relay?.stop();
  await jsonOnly?.stop();
});

const now = () => Math.floor(Date.now() / 1000);

function collect(r, filters) {
  return new Promise((resolve, reject) => {
    const got = [];
    const timer = setTimeout(() => reject(new Error('no EOSE')), 5000);
    const sub = r.subscribe(filters, {
      onevent: (e) => got.push(e),
      oneose: () => {
        clearTimeout(timer);
        sub.close();
        resolve(got);
      },
    });
  });
}

async function waitFor(check, what) {
  for (let i = 0; i < 100; i++) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function exercise(url, transport, expected) {
  const sk = generateSecretKey();
  const pk = getPublicKey(sk);
  const r = await Relay.connect(url, { transport });
  assert.equal(r.transport, expected);
  const tag = `js-${transport}-${expected}`;

  const note = finalizeEvent({ kind: 1, created_at: now() - 5, tags: [['t', tag], ['p', pk]], content: `stored ✓ ${transport} \u2028 <&>` }, sk);
  assert.equal(await r.publish(note), '');

  const stored = await collect(r, [{ authors: [pk], kinds: [1] }]);
  assert.equal(stored.length, 1);
  assert.equal(stored[0].id, note.id);
  assert.equal(stored[0].content, note.content);
  assert.equal(stored[0][verifiedSymbol], true, 'verified before onevent');

  const live = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no live event')), 5000);
    let eose = false;
    const sub = r.subscribe([{ '#t': [tag], since: now() - 1 }], {
      oneose: () => { eose = true; },
      onevent: (e) => {
        if (!eose) return;
        clearTimeout(timer);
        sub.close();
        resolve(e);
      },
    });
  });
  await new Promise((res) => setTimeout(res, 100));
  const second = finalizeEvent({ kind: 1, created_at: now(), tags: [['t', tag]], content: 'live' }, sk);
  await r.publish(second);
  assert.equal((await live).id, second.id);

  assert.equal(await r.count([{ authors: [pk] }]), 2);

  const forged = { ...finalizeEvent({ kind: 1, created_at: now(), tags: [], content: 'x' }, sk), content: 'y' };
  await assert.rejects(r.publish(forged), /invalid/);

  await waitFor(() => r.authChallenge, 'the AUTH challenge');
  const answer = await r.auth(async (template) => finalizeEvent(template, sk));
  assert.equal(typeof answer, 'string');

  // A JSON client (nostr-tools) sees the same event a binary client stored.
  const tools = await ToolsRelay.connect(url);
  const seen = await collect(tools, [{ ids: [note.id] }]);
  tools.close();
  const fields = ({ id, pubkey, created_at, kind, tags, content, sig }) => ({ id, pubkey, created_at, kind, tags, content, sig });
  assert.deepEqual(fields(seen[0]), fields(note));
  r.close();
  assert.equal(r.connected, false);
}

test('binary transport: publish, stored and live events, EOSE, count, auth', { skip }, () =>
  exercise(relay.url, 'binary', 'v2'));
test('auto picks nostrwire.v2 when the relay offers it', { skip }, () =>
  exercise(relay.url, 'auto', 'v2'));
test('nostrwire.v1 on request', { skip }, () => exercise(relay.url, 'v1', 'v1'));
test('JSON transport on request', { skip }, () => exercise(relay.url, 'json', 'json'));
test('auto falls back to JSON when the relay has the binary transport off', { skip }, () =>
  exercise(jsonOnly.url, 'auto', 'json'));
test('binary insists: connecting fails against a JSON-only relay', { skip }, async () => {
  await assert.rejects(Relay.connect(jsonOnly.url, { transport: 'binary' }));
});

// A relay's store decodes records with the default limits, so a scripted
// relay serves what a relay with wider limits would.
test('limits above the defaults: an event with more tags than the defaults allow arrives verified over JSON, v1 and v2; its forgery does not', async (t) => {
  const sk = generateSecretKey();
  const tags = Array.from({ length: DEFAULT_LIMITS.maxTags + 1 }, (_, i) => ['t', `n${i}`]);
  const event = finalizeEvent({ kind: 1, created_at: now(), tags, content: 'many tags' }, sk);
  const forged = { ...event, content: 'forged' };
  const url = await scriptedRelay(t, [event, forged], { v2: true });
  const limits = { ...DEFAULT_LIMITS, maxTags: 30_000 };
  for (const transport of ['json', 'v1', 'v2']) {
    const r = await Relay.connect(url, { transport, limits });
    assert.equal(r.transport, transport);
    const dropped = [];
    const got = await new Promise((resolve) => {
      const seen = [];
      r.subscribe([{}], {
        onevent: (e) => seen.push([e.id, e.content, e.tags.length, e[verifiedSymbol]]),
        oninvalidevent: (e, reason) => dropped.push([e.content, reason]),
        oneose: () => resolve(seen),
      });
    });
    assert.deepEqual(got, [[event.id, event.content, tags.length, true]], transport);
    assert.deepEqual(dropped, [['forged', 'invalid']], transport);
    r.close();
  }
});

test('events that do not verify never reach onevent', { skip }, async (t) => {
  const sk = generateSecretKey();
  const good = finalizeEvent({ kind: 1, created_at: now(), tags: [], content: 'fine' }, sk);
  // A relay that forwards whatever it is given: answer the REQ with a forged copy.
  const { WebSocketServer } = await import('ws');
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((r) => server.once('listening', r));
  server.on('connection', (ws) => ws.on('message', (data) => {
    const [, id] = JSON.parse(String(data));
    ws.send(JSON.stringify(['EVENT', id, { ...good, content: 'forged' }]));
    ws.send(JSON.stringify(['EVENT', id, good]));
    ws.send(JSON.stringify(['EOSE', id]));
  }));
  t.after(() => server.close());
  const r = await Relay.connect(`ws://127.0.0.1:${server.address().port}`, { transport: 'json' });
  t.after(() => r.close());
  const invalid = [];
  const got = await new Promise((resolve) => {
    const events = [];
    r.subscribe([{}], { onevent: (e) => events.push(e), oninvalidevent: (e) => invalid.push(e), oneose: () => resolve(events) });
  });
  assert.deepEqual(got.map((e) => e.content), ['fine']);
  assert.deepEqual(invalid.map((e) => e.content), ['forged']);
});

test('hostile binary frames are dropped with a notice; the connection stays', async (t) => {
  const sk = generateSecretKey();
  const good = finalizeEvent({ kind: 1, created_at: now(), tags: [], content: 'fine' }, sk);
  const { WebSocketServer } = await import('ws');
  const { eventFrame } = await import('../dist/index.js');
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0, handleProtocols: (p) => (p.has('nostrwire.v1') ? 'nostrwire.v1' : false) });
  await new Promise((r) => server.once('listening', r));
  server.on('connection', (ws) => ws.on('message', (data) => {
    const [, id] = JSON.parse(String(data).slice(1));
    const sid = Buffer.from(id);
    const record = eventFrame(good).subarray(1);
    const frame = (type, ...parts) => Buffer.concat([Buffer.from([type]), ...parts.map((p) => Buffer.from(p))]);
    ws.send(Buffer.alloc(0));                                            // empty frame
    ws.send(frame(0x09));                                                // unknown type
    ws.send(frame(0x03, [sid.length], sid, record.subarray(0, 100)));    // truncated record
    ws.send(frame(0x03, [0]));                                           // empty subscription id
    ws.send(frame(0x04, new Uint8Array(32), [2]));                       // OK flag 2
    ws.send(frame(0x03, [sid.length], sid, record));                     // a good event
    ws.send(frame(0x05, sid));                                           // EOSE
  }));
  t.after(() => server.close());
  const r = await Relay.connect(`ws://127.0.0.1:${server.address().port}`, { transport: 'binary' });
  t.after(() => r.close());
  const notices = [];
  r.onnotice = (m) => notices.push(m);
  const got = await new Promise((resolve) => {
    const events = [];
    r.subscribe([{}], { onevent: (e) => events.push(e), oneose: () => resolve(events) });
  });
  assert.deepEqual(got.map((e) => e.id), [good.id]);
  assert.deepEqual(notices, [
    'invalid: unknown_message',
    'invalid: unknown_message',
    'invalid: truncated',
    'invalid: bad_subscription_id',
    'invalid: non_canonical_flag',
  ]);
  assert.equal(r.connected, true);

  // Once closed, every call fails at once, without stray rejections later.
  r.close();
  await assert.rejects(r.publish(good), /closed/);
  await assert.rejects(r.count([{}]), /closed/);
  assert.throws(() => r.subscribe([{}], {}), /closed/);
});

for (const transport of ['json', 'binary']) {
  test(`${transport}: events that match none of the filters never reach onevent, and are counted`, async (t) => {
    const sk = generateSecretKey();
    const pk = getPublicKey(sk);
    const t0 = now();
    const wanted = finalizeEvent({ kind: 1, created_at: t0, tags: [['t', 'wanted']], content: 'match' }, sk);
    const sent = [
      finalizeEvent({ kind: 1, created_at: t0, tags: [['t', 'wanted']], content: 'another author' }, generateSecretKey()),
      finalizeEvent({ kind: 7, created_at: t0, tags: [['t', 'wanted']], content: 'another kind' }, sk),
      finalizeEvent({ kind: 1, created_at: t0 - 3600, tags: [['t', 'wanted']], content: 'too old' }, sk),
      finalizeEvent({ kind: 1, created_at: t0, tags: [['t', 'other'], ['x', 'wanted']], content: 'no such tag value' }, sk),
      wanted,
      { ...finalizeEvent({ kind: 1, created_at: t0, tags: [['t', 'wanted']], content: 'x' }, sk), content: 'forged' },
    ];
    const url = await scriptedRelay(t, sent);
    const r = await Relay.connect(url, { transport });
    t.after(() => r.close());
    // The scripted relay speaks nostrwire.v1 only.
    assert.equal(r.transport, transport === 'binary' ? 'v1' : transport);
    const drops = [];
    let sub;
    const got = await new Promise((resolve) => {
      const events = [];
      sub = r.subscribe([{ authors: [pk], kinds: [1], since: t0 - 60, '#t': ['wanted'] }, { ids: ['00'.repeat(32)] }], {
        onevent: (e) => events.push(e),
        oninvalidevent: (e, reason) => drops.push([e.content, reason]),
        oneose: () => resolve(events),
      });
    });
    assert.deepEqual(got.map((e) => e.id), [wanted.id]);
    assert.deepEqual(drops, [
      ['another author', 'unmatched'],
      ['another kind', 'unmatched'],
      ['too old', 'unmatched'],
      ['no such tag value', 'unmatched'],
      ['forged', 'invalid'],
    ]);
    assert.deepEqual(sub.dropped, { invalid: 1, unmatched: 4 });
  });
}

test('alreadyHaveEvent is asked before verification, and its events are not verified', async (t) => {
  const sk = generateSecretKey();
  const events = [0, 1, 2].map((i) => finalizeEvent({ kind: 1, created_at: now(), tags: [], content: `n${i}` }, sk));
  const url = await scriptedRelay(t, events);
  const verified = [];
  const r = await Relay.connect(url, { transport: 'json', verifyEvent: (e) => (verified.push(e.id), true) });
  t.after(() => r.close());
  const got = await new Promise((resolve) => {
    const seen = [];
    r.subscribe([{}], { alreadyHaveEvent: (id) => id !== events[1].id, onevent: (e) => seen.push(e.id), oneose: () => resolve(seen) });
  });
  assert.deepEqual(got, [events[1].id]);
  assert.deepEqual(verified, [events[1].id]);
});

test('publishing the same event twice: both calls settle with the relay\'s answer to each', async (t) => {
  const { WebSocketServer } = await import('ws');
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((r) => server.once('listening', r));
  // Answers each EVENT after a pause, as a relay busy writing does.
  server.on('connection', (ws) => {
    let n = 0;
    ws.on('message', (data) => {
      const [type, event] = JSON.parse(String(data));
      if (type !== 'EVENT') return;
      const answer = n++ === 0 ? '' : 'duplicate: already have this event';
      setTimeout(() => ws.send(JSON.stringify(['OK', event.id, true, answer])), 50);
    });
  });
  t.after(() => server.close());
  const r = await Relay.connect(`ws://127.0.0.1:${server.address().port}`, { transport: 'json' });
  t.after(() => r.close());
  r.publishTimeout = 1000;
  const note = finalizeEvent({ kind: 1, created_at: now(), tags: [], content: 'twice' }, generateSecretKey());
  const answers = await Promise.allSettled([r.publish(note), r.publish(note)]);
  assert.deepEqual(answers, [
    { status: 'fulfilled', value: '' },
    { status: 'fulfilled', value: 'duplicate: already have this event' },
  ]);
});

test('a COUNT the relay refuses with CLOSED rejects with its reason, at once', { skip }, async (t) => {
  const strict = await startRelay({ config: '[rate]\nreqs_per_second = 0.001\nreqs_burst = 1\n' });
  t.after(() => strict.stop());
  const r = await Relay.connect(strict.url);
  t.after(() => r.close());
  r.publishTimeout = 3000;
  assert.equal(await r.count([{ kinds: [1] }]), 0);
  const started = performance.now();
  await assert.rejects(r.count([{ kinds: [1] }]), /^Error: rate-limited:/);
  assert.ok(performance.now() - started < 1000, 'not left to time out');
});

test('a Relay whose connection failed can connect again', async (t) => {
  const { WebSocketServer } = await import('ws');
  const { freePort } = await import('./relay-process.mjs');
  const port = await freePort();
  const r = new Relay(`ws://127.0.0.1:${port}`, { transport: 'json' });
  t.after(() => r.close());
  await assert.rejects(r.connect(), /failed/);
  const server = new WebSocketServer({ host: '127.0.0.1', port });
  await new Promise((res) => server.once('listening', res));
  t.after(() => server.close());
  await r.connect();
  assert.equal(r.connected, true);
});
