// nostrwire.v2 in the JS package: the golden frames of
// vectors/wire/transport.json, and the Relay client against a live relay
// with and without a dictionary set (fetched, checked against its name,
// held), next to a JSON client.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import WebSocket from 'ws';
import { Relay as ToolsRelay, useWebSocketImplementation as useToolsWebSocket } from 'nostr-tools/relay';
import { Relay, useWebSocketImplementation, verifiedSymbol, NwbError, initVerifier } from '../dist/index.js';
import { decodeRelayFrameV2, holdFrame } from '../dist/transport.js';
import { decompressRecord } from '../dist/record.js';
import { zstdDecoder } from '../dist/zstd.js';
import { startRelay, haveBinary, bin } from './relay-process.mjs';

useWebSocketImplementation(WebSocket);
useToolsWebSocket(WebSocket);
const skip = !haveBinary && 'no nostrwire binary (set NOSTRWIRE_BIN)';
const repo = resolve(new URL('../..', import.meta.url).pathname);
const vectors = JSON.parse(readFileSync(join(repo, 'vectors/wire/transport.json'), 'utf8'));
const unhex = (h) => Uint8Array.from(h.match(/../g) ?? [], (b) => parseInt(b, 16));
const hex = (b) => Buffer.from(b).toString('hex');

test('valid v2 relay frames decode as the vectors say; hold frames encode to their bytes', () => {
  for (const c of vectors.valid) {
    const bytes = unhex(c.hex);
    const e = c.expect;
    if (c.direction === 'client') {
      assert.equal(e.type, 'hold', c.name);
      assert.equal(hex(holdFrame(e.sets)), c.hex, c.name);
      continue;
    }
    const f = decodeRelayFrameV2(bytes);
    if (e.type === 'dictionary_set') {
      assert.deepEqual(f, { type: 'dictionary_set', set: e.set }, c.name);
    } else if (e.type === 'eose') {
      assert.deepEqual(f, { type: 'eose', subId: e.subscription_id }, c.name);
    } else {
      assert.equal(f.type, 'batch', c.name);
      assert.equal(f.subId, e.subscription_id, c.name);
      assert.equal(f.records.length, e.count, c.name);
      f.records.forEach((r, i) => {
        const want = e.records[Math.min(i, e.records.length - 1)];
        assert.equal(hex(r), want.stored, c.name);
        const plain = r[0] === 0x81 ? decompressRecord(r, undefined, zstdDecoder) : r;
        assert.equal(hex(plain), want.record ?? want.stored, c.name);
      });
    }
  }
});

test('invalid v2 relay frames fail with their error kind', () => {
  let n = 0;
  for (const c of vectors.invalid.filter((c) => c.direction === 'relay')) {
    assert.throws(
      () => decodeRelayFrameV2(unhex(c.hex)),
      (e) => e instanceof NwbError && e.kind === c.error,
      c.name,
    );
    n++;
  }
  assert.ok(n >= 10);
});

// Real events every client may read, as JSON objects.
const corpus = readFileSync(join(repo, 'testdata/real-events.jsonl'), 'utf8')
  .trim()
  .split('\n')
  .map((l) => JSON.parse(l))
  .filter((e) => [1, 6, 7].includes(e.kind))
  .slice(0, 120);

function collect(r, filters) {
  return new Promise((resolve, reject) => {
    const got = [];
    const timer = setTimeout(() => reject(new Error('no EOSE')), 10000);
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

let withSet, withoutSet, setHash;
before(async () => {
  if (skip) return;
  const dir = mkdtempSync(join(tmpdir(), 'nostrwire-js-v2-'));
  const set = join(dir, 'set.nwbd');
  execFileSync(bin, ['dict', 'train', '--per-kind', '--corpus', join(repo, 'testdata/real-events.jsonl'), '-o', set], { stdio: 'ignore' });
  setHash = createHash('sha256').update(readFileSync(set)).digest('hex');
  withSet = await startRelay({ config: `[storage]\ndictionaries = "${set}"\n[auth]\nchallenge_on_connect = false\n` });
  withoutSet = await startRelay({ config: '[storage]\nauto_dictionaries = 0\n' });
  // Stored through a JSON client, compressed by the relay as it admits them.
  const tools = await ToolsRelay.connect(withSet.url);
  for (const e of corpus) await tools.publish(e);
  tools.close();
  writeFileSync(join(dir, 'done'), '');
});
after(async () => {
  await withSet?.stop();
  await withoutSet?.stop();
});

test('auto speaks nostrwire.v2, fetches the relay set, holds it, and gets the same verified events as JSON', { skip }, async () => {
  const r = await Relay.connect(withSet.url);
  assert.equal(r.transport, 'v2');
  assert.equal(r.dictionarySet.hash, setHash);
  // Not held before connect (nothing cached in Node): fetched meanwhile.
  for (let i = 0; i < 200 && !r.dictionarySet.held; i++) await new Promise((res) => setTimeout(res, 20));
  assert.equal(r.dictionarySet.held, true);
  const json = await Relay.connect(withSet.url, { transport: 'json' });
  const filter = [{ kinds: [1, 6, 7] }];
  const want = (await collect(json, filter)).map((e) => e.id);
  assert.equal(want.length, corpus.length);
  const got = await collect(r, filter);
  assert.deepEqual(got.map((e) => e.id), want);
  assert.ok(got.every((e) => e[verifiedSymbol] === true));
  // A second connection takes the set from this page's memory at connect.
  const again = await Relay.connect(withSet.url);
  assert.equal(again.dictionarySet.held, true);
  assert.deepEqual((await collect(again, filter)).map((e) => e.id), want);
  for (const c of [r, json, again]) c.close();
});

test('unverified nostrwire.v2: the WebAssembly module decodes every record, compressed with the relay set, into the JSON client\'s events', { skip }, async () => {
  await initVerifier();
  const r = await Relay.connect(withSet.url, { verifyEvent: false });
  for (let i = 0; i < 200 && !r.dictionarySet.held; i++) await new Promise((res) => setTimeout(res, 20));
  assert.equal(r.dictionarySet.held, true);
  const json = await Relay.connect(withSet.url, { transport: 'json', verifyEvent: false });
  const filter = [{ kinds: [1, 6, 7] }];
  const want = await collect(json, filter);
  assert.equal(want.length, corpus.length);
  // The module's output reaches the client through JSON.parse: count what
  // it decoded and what it left to the JavaScript decoder (null).
  const parse = JSON.parse;
  let decoded = 0;
  let left = 0;
  JSON.parse = (text, ...rest) => {
    const v = parse(text, ...rest);
    if (typeof text === 'string' && /^\[(null|\{"id":")/.test(text)) for (const e of v) e === null ? left++ : decoded++;
    return v;
  };
  let got;
  try {
    got = await collect(r, filter);
  } finally {
    JSON.parse = parse;
  }
  assert.deepEqual(got, want);
  assert.equal(decoded, corpus.length);
  assert.equal(left, 0);
  for (const c of [r, json]) c.close();
});

test('nostrwire.v2 with workers: records go to the verifier pool as bytes', { skip }, async () => {
  // Node has no Worker global: the option is ignored and records are
  // verified on the main thread, with the same results.
  const r = await Relay.connect(withSet.url, { transport: 'v2', workers: 2 });
  const got = await collect(r, [{ kinds: [1, 6, 7] }]);
  assert.equal(got.length, corpus.length);
  assert.ok(got.every((e) => e[verifiedSymbol] === undefined || e[verifiedSymbol] === true));
  r.close();
});

test('a relay without dictionaries names none; records still arrive as stored', { skip }, async () => {
  const r = await Relay.connect(withoutSet.url, { transport: 'v2' });
  assert.deepEqual(r.dictionarySet, { hash: null, held: false });
  const tools = await ToolsRelay.connect(withoutSet.url);
  for (const e of corpus.slice(0, 30)) await tools.publish(e);
  tools.close();
  const got = await collect(r, [{ kinds: [1, 6, 7] }]);
  assert.equal(got.length, 30);
  r.close();
});

test('v1 and v2 insist: a JSON-only relay refuses them', { skip }, async () => {
  const jsonOnly = await startRelay({ config: '[websocket]\nbinary = false\n' });
  try {
    await assert.rejects(Relay.connect(jsonOnly.url, { transport: 'v2' }));
    await assert.rejects(Relay.connect(jsonOnly.url, { transport: 'v1' }));
    const r = await Relay.connect(jsonOnly.url);
    assert.equal(r.transport, 'json');
    assert.equal(r.dictionarySet, null);
    r.close();
  } finally {
    await jsonOnly.stop();
  }
});
