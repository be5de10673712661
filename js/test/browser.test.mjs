// Headless Chromium: the package's Relay client in a page on loopback,
// against live relays, over both transports and with the JSON fallback.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startRelay, haveBinary } from './relay-process.mjs';
import { scriptedRelay, scriptedRelayV2, batchFrame, eoseFrame, jsonEventFrame } from './scripted-relay.mjs';
import { servePage, launch, openPage, haveChromium } from './browser/harness.mjs';

const noBrowser = !haveChromium && 'no chromium (js/scripts/install-chromium.sh)';
const skip = noBrowser || (!haveBinary && 'no nostrwire binary (set NOSTRWIRE_BIN)');

let relay, jsonOnly, site, browser, page;
before(async () => {
  if (noBrowser) return;
  if (haveBinary) {
    relay = await startRelay();
    jsonOnly = await startRelay({ config: '[websocket]\nbinary = false\n' });
  }
  site = await servePage(new URL('./browser/page.js', import.meta.url).pathname);
  browser = await launch();
  page = await openPage(browser, site.url);
});
after(async () => {
  await browser?.close();
  await site?.close();
  await relay?.stop();
  await jsonOnly?.stop();
});

function check(result, transport) {
  assert.equal(result.transport, transport);
  assert.equal(result.published, '');
  assert.deepEqual(result.stored, [true]);
  assert.equal(result.live, true);
  assert.equal(result.count, 2);
  assert.equal(result.forgedRefused, true);
  assert.match(result.auth, /^ok/);
  assert.equal(result.verifier, 'wasm');
}

for (const transport of ['binary', 'json', 'auto']) {
  test(`Chromium, transport ${transport}: publish, stored, EOSE, live, count, auth`, { skip }, async () => {
    const result = await page.evaluate((url, t) => window.scenario(url, t), relay.url, transport);
    check(result, transport === 'json' ? 'json' : 'v2');
    assert.deepEqual(page.errors, []);
  });
}

test('Chromium, binary transport with events verified in two Web Workers', { skip }, async () => {
  const result = await page.evaluate((url) => window.scenario(url, 'binary', { workers: 2 }), relay.url);
  check(result, 'v2');
  assert.equal(result.workerFailure, null);
});

test('Chromium, verifier workers that cannot load: events are verified on the main thread', { skip }, async () => {
  const result = await page.evaluate(
    (url) => window.scenario(url, 'binary', { workers: 2, workerUrl: new URL('/no-such-worker.js', location.href) }),
    relay.url,
  );
  // Stored events still arrive verified, the forged one is still refused,
  // and the relay says why the workers stopped.
  check(result, 'v2');
  assert.match(result.workerFailure, /verifier worker failed/);
});

test('Chromium, verifier workers: events the app already has are never handed to a worker', { skip: noBrowser }, async (t) => {
  const { generateSecretKey, finalizeEvent } = await import('nostr-tools/pure');
  const sk = generateSecretKey();
  const now = Math.floor(Date.now() / 1000);
  const events = [0, 1, 2, 3].map((i) => finalizeEvent({ kind: 1, created_at: now, tags: [], content: `n${i}` }, sk));
  const url = await scriptedRelay(t, events);
  const have = [events[0].id, events[2].id, events[3].id];
  const result = await page.evaluate((u, h) => window.withWorkers(u, h), url, have);
  assert.equal(result.workerFailure, null);
  assert.deepEqual(result.got, [{ id: events[1].id, verified: true }]);
  assert.equal(result.posted, 1, 'only the event the app lacks is verified');
});

test('Chromium, verifier workers: JSON EVENT frames among nostrwire.v2 batches are each verified as what they are', { skip: noBrowser }, async (t) => {
  const { generateSecretKey, finalizeEvent } = await import('nostr-tools/pure');
  const { encodeEvent } = await import('../dist/index.js');
  const sk = generateSecretKey();
  const now = Math.floor(Date.now() / 1000);
  const events = Array.from({ length: 40 }, (_, i) => finalizeEvent({ kind: 1, created_at: now, tags: [], content: `m${i}` }, sk));
  const forged = (e) => ({ ...e, content: `${e.content} forged` });
  // Records, then JSON events while the workers verify the first batch,
  // then records again: a forged one of each kind.
  const relay = await scriptedRelayV2(t, {
    onReq: (ws, id) => {
      ws.send(batchFrame(id, events.slice(0, 10).map((e) => encodeEvent(e))));
      ws.send(batchFrame(id, [...events.slice(10, 20), forged(events[20])].map((e) => encodeEvent(e))));
      for (const e of [...events.slice(21, 30), forged(events[30])]) ws.send(jsonEventFrame(id, e));
      ws.send(batchFrame(id, events.slice(31).map((e) => encodeEvent(e))));
      ws.send(eoseFrame(id));
    },
  });
  const result = await page.evaluate((u) => window.throughWorkers(u), relay.url);
  assert.equal(result.workerFailure, null);
  assert.equal(result.eose, true);
  const want = events.filter((_, i) => i !== 20 && i !== 30).map((e) => ({ id: e.id, verified: true }));
  assert.deepEqual(result.got, want);
  assert.deepEqual(result.dropped, { invalid: 2, unmatched: 0 });
  assert.deepEqual(page.errors, []);
});

test('Chromium falls back to JSON against a relay with the binary transport off', { skip }, async () => {
  const result = await page.evaluate((url) => window.scenario(url, 'auto'), jsonOnly.url);
  check(result, 'json');
  assert.equal(await page.evaluate((url) => window.binaryRefused(url), jsonOnly.url), true);
});

test("the relay's web page: NIP-11 facts and counters that change after a publish", { skip }, async () => {
  const { default: WebSocket } = await import('ws');
  const { generateSecretKey, finalizeEvent } = await import('nostr-tools/pure');
  const { Relay, useWebSocketImplementation } = await import('../dist/index.js');
  const { mkdirSync } = await import('node:fs');
  useWebSocketImplementation(WebSocket);

  const tab = await browser.newPage();
  const response = await tab.goto(relay.http + '/');
  assert.match(response.headers()['content-type'], /^text\/html/);
  await tab.waitForFunction(() => Number(document.body.dataset.refreshed) >= 1, { timeout: 10000 });
  const read = () => tab.evaluate(() => ({
    name: document.getElementById('name').textContent,
    since: document.getElementById('since').textContent,
    dbEvents: document.getElementById('db_events').textContent,
    facts: document.getElementById('facts').rows.length,
  }));
  const before = await read();
  assert.ok(before.facts > 3, 'NIP-11 facts shown');

  const r = await Relay.connect(relay.url);
  const sk = generateSecretKey();
  await r.publish(finalizeEvent({ kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content: 'counted' }, sk));
  await tab.waitForFunction((s) => document.getElementById('since').textContent !== s, { timeout: 10000 }, before.since);
  const after = await read();
  assert.equal(Number(after.since.replace(/,/g, '')), Number(before.since.replace(/,/g, '')) + 1);
  assert.notEqual(after.dbEvents, before.dbEvents);
  r.close();

  const dir = new URL('../test-output/', import.meta.url).pathname;
  mkdirSync(dir, { recursive: true });
  await tab.setViewport({ width: 1000, height: 900 });
  await tab.screenshot({ path: dir + 'relay-page.png', fullPage: true });
  await tab.close();
});
