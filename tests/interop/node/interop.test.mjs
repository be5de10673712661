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
