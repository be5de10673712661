// nostr-tools against a running nostrwire relay (NOSTRWIRE_RELAY_URL):
// publish, query and receive a live event.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { useWebSocketImplementation, Relay } from 'nostr-tools/relay';
import { generateSecretKey, getPublicKey, finalizeEvent, verifyEvent } from 'nostr-tools/pure';

useWebSocketImplementation(WebSocket);
const url = process.env.NOSTRWIRE_RELAY_URL;

test('publish, query and live subscription through nostr-tools', { skip: !url && 'NOSTRWIRE_RELAY_URL not set' }, async () => {
  const sk = generateSecretKey();
  const pk = getPublicKey(sk);
  const relay = await Relay.connect(url);
  const now = Math.floor(Date.now() / 1000);
  const note = finalizeEvent({ kind: 1, created_at: now - 5, tags: [['t', 'interop']], content: 'hello from nostr-tools ✓ \u2028 <&>' }, sk);
  await relay.publish(note);

  const stored = await new Promise((resolve, reject) => {
    const got = [];
    const timer = setTimeout(() => reject(new Error('no EOSE')), 5000);
    const sub = relay.subscribe([{ authors: [pk], kinds: [1] }], {
      onevent(e) { got.push(e); },
      oneose() { clearTimeout(timer); sub.close(); resolve(got); },
    });
  });
  assert.equal(stored.length, 1);
  assert.equal(stored[0].id, note.id);
  assert.equal(stored[0].content, note.content);
  assert.ok(verifyEvent(stored[0]));

  const live = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no live event')), 5000);
    const sub = relay.subscribe([{ '#t': ['interop'], since: now }], {
      onevent(e) { clearTimeout(timer); sub.close(); resolve(e); },
    });
  });
  const second = finalizeEvent({ kind: 1, created_at: now, tags: [['t', 'interop']], content: 'live' }, sk);
  await relay.publish(second);
  assert.equal((await live).id, second.id);

  const forged = { ...finalizeEvent({ kind: 1, created_at: now, tags: [], content: 'x' }, sk), content: 'y' };
  await assert.rejects(relay.publish(forged), /invalid/);
  relay.close();
});

// permessage-deflate (RFC 7692) with the `ws` package's own implementation,
// with and without context takeover, and without compression at all.
function open(options) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, options);
    ws.once('upgrade', (response) => { ws.negotiated = response.headers['sec-websocket-extensions']; });
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}

function roundTrip(ws, message, until) {
  return new Promise((resolve, reject) => {
    const got = [];
    const timer = setTimeout(() => reject(new Error(`no answer to ${message.slice(0, 40)}`)), 5000);
    const onMessage = (data, isBinary) => {
      assert.equal(isBinary, false);
      const parsed = JSON.parse(data.toString('utf8'));
      if (parsed[0] === 'AUTH') return;
      got.push(parsed);
      if (until(parsed)) {
        clearTimeout(timer);
        ws.off('message', onMessage);
        resolve(got);
      }
    };
    ws.on('message', onMessage);
    ws.send(message);
  });
}

const deflateModes = [
  ['context takeover', { threshold: 0 }, 'permessage-deflate'],
  ['no context takeover', { threshold: 0, serverNoContextTakeover: true, clientNoContextTakeover: true }, 'permessage-deflate; server_no_context_takeover; client_no_context_takeover'],
  ['no compression', false, undefined],
];

for (const [name, perMessageDeflate, expected] of deflateModes) {
  test(`ws client, ${name}: publish and query`, { skip: !url && 'NOSTRWIRE_RELAY_URL not set' }, async () => {
    const ws = await open({ perMessageDeflate });
    try {
      await exercise(ws);
    } finally {
      ws.close();
    }
    assert.equal(ws.negotiated, expected);
  });
}

async function exercise(ws) {
  const sk = generateSecretKey();
  const pk = getPublicKey(sk);
  const now = Math.floor(Date.now() / 1000);
  const events = [];
  for (let i = 0; i < 20; i++) {
    const e = finalizeEvent({ kind: 1, created_at: now - i, tags: [['t', 'deflate']], content: `note ${i} ${'compressible text '.repeat(i * 10)}` }, sk);
    events.push(e);
    const [ok] = await roundTrip(ws, JSON.stringify(['EVENT', e]), (m) => m[0] === 'OK');
    assert.deepEqual(ok, ['OK', e.id, true, '']);
  }
  const answer = await roundTrip(ws, JSON.stringify(['REQ', 'q', { authors: [pk] }]), (m) => m[0] === 'EOSE');
  const served = answer.filter((m) => m[0] === 'EVENT').map((m) => m[2]);
  assert.deepEqual(served.map((e) => e.id), events.map((e) => e.id));
  for (const e of served) assert.ok(verifyEvent(e));
}
