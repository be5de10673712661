// Headless Chromium: one page reads the same filter from five relays at
// once through a pool: a nostrwire relay with nostrwire.v2, one with the
// binary transport off (JSON), khatru (JSON), one that stalls after the
// handshake and one that drops the connection mid-REQ, the first three
// holding overlapping events. This package's SimplePool (main thread, and
// two verifier workers) and nostr-tools' pool with nostr-wasm must hand on
// the same events, each once.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { haveBinary } from './relay-process.mjs';
import { haveKhatru } from './khatru-process.mjs';
import { scriptedRelayServer } from './scripted-relay.mjs';
import { KINDS, poolEvents, threeRelays } from './pool-relays.mjs';
import { openPoolPage, haveChromium } from './browser/harness.mjs';

const skip =
  (!haveChromium && 'no chromium (js/scripts/install-chromium.sh)') ||
  (!haveBinary && 'no nostrwire binary (set NOSTRWIRE_BIN)') ||
  (!haveKhatru && 'no khatru relay (js/scripts/build-khatru.sh)');

const NEWEST = Math.floor(Date.now() / 1000) - 3600;
let events, filter, relays, stalled, dropping, chromium, page;
before(async () => {
  if (skip) return;
  const data = poolEvents({ count: 600, seed: 46, newest: NEWEST });
  events = data.events;
  filter = { kinds: KINDS, since: data.since, until: data.until, limit: 1000 };
  relays = await threeRelays(events);
  stalled = await scriptedRelayServer(events, { stall: true });
  // It sends a tenth of the events first, then drops the connection.
  dropping = await scriptedRelayServer(events.slice(0, 60), { closeAfter: 40 });
  chromium = await openPoolPage();
  page = chromium.page;
});
after(async () => {
  await chromium?.close();
  await relays?.stop();
  await stalled?.stop();
  await dropping?.stop();
});

const sorted = (ids) => [...ids].sort();

async function run(client) {
  const urls = [...relays.urls, stalled.url, dropping.url];
  // Closed once every event came and oneose fired (the stalled relay's
  // maxWait), whichever is last.
  return page.evaluate((o) => window.poolRun(o), { client, urls, filter, maxWait: 3000, expect: events.length, waitForEose: true });
}

const results = {};
for (const client of ['ours', 'ours-workers-2', 'tools-wasm']) {
  test(`Chromium, ${client}: five relays at once, one stalled and one dropped mid-REQ`, { skip }, async () => {
    const r = (results[client] = await run(client));
    assert.deepEqual(sorted(r.ids), sorted(events.map((e) => e.id)), 'every event, once');
    assert.equal(r.eoses, 1);
    assert.equal(r.reasons.length, 5);
    assert.equal(r.reasons[4], 'relay connection closed');
    assert.equal(r.verified, events.length, 'each distinct event verified once');
    // Each event is on two of the three relays; the dropping relay sent 40.
    assert.equal(r.delivered, 2 * events.length + 40);
    if (client !== 'tools-wasm') assert.deepEqual(r.transports, ['v2', 'json', 'json', 'v1', 'v1']);
    assert.deepEqual(page.errors, []);
  });
}

test('Chromium: the package\'s pool and nostr-tools\' hand on the same set of events', { skip }, () => {
  assert.deepEqual(sorted(results.ours.ids), sorted(results['tools-wasm'].ids));
  assert.deepEqual(sorted(results['ours-workers-2'].ids), sorted(results['tools-wasm'].ids));
});
