// nostrwire.v2 batches decoded by the WebAssembly module
// (`renderRecords`: crates/verify-wasm/src/render.rs, then JSON.parse)
// against the JavaScript decoder, record by record: the same event, or
// null exactly where the JavaScript decoder throws. Over the wire vectors,
// random events with awkward tags and content, mutations of their bytes,
// and the corpus; and a client on a scripted relay that decodes with it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { finalizeEvent } from 'nostr-tools/pure';
import { decodeRecord, encodeEvent, NwbError } from '../dist/index.js';
import { decodeRelayFrameV2 } from '../dist/transport.js';
import { loadVerifier } from '../dist/verify-wasm.js';
import { seeded, varint } from './helpers.mjs';

const repo = resolve(new URL('../..', import.meta.url).pathname);
const unhex = (h) => Uint8Array.from(Buffer.from(h, 'hex'));
const wasm = await loadVerifier();

const rand = seeded(0x2545f491);
const pick = (xs) => xs[Math.floor(rand() * xs.length)];
const hexOf = (n) => Array.from({ length: n }, () => '0123456789abcdef'[Math.floor(rand() * 16)]).join('');
const PIECES = ['a', 'Z', ' ', '"', '\\', '\n', '\r', '\t', '\b', '\f', '\u0000', '\u0001', '\u001f', '\u007f', 'é', '\u2028', '日本', '😀', '</script>', '\\u0041', '{"k":[1]}', '__proto__'];
const text = (max) => Array.from({ length: Math.floor(rand() * max) }, () => pick(PIECES)).join('');
const tagValue = () => pick([hexOf(64), hexOf(2), hexOf(10), hexOf(98), hexOf(64).toUpperCase(), '', text(6), '12345', 'wss://relay.example/', hexOf(31)]);
const tag = () => [pick(['e', 'p', 't', 'a', 'x', 'emoji', '', 'E', 'é', text(3)]), ...Array.from({ length: Math.floor(rand() * 4) }, tagValue)];
const sk = Uint8Array.from({ length: 32 }, (_, i) => i + 1);
const signed = () =>
  finalizeEvent(
    {
      kind: pick([0, 1, 3, 7, 30023, 65535]),
      created_at: pick([0, 1, 1700000000, 2 ** 53 - 1]),
      tags: Array.from({ length: Math.floor(rand() * 6) }, tag),
      content: rand() < 0.1 ? text(400) : text(30),
    },
    sk,
  );

/** The records as a batch lists them after its count. */
function list(records) {
  const parts = [];
  for (const r of records) parts.push(varint(r.length), r);
  return Buffer.concat(parts);
}

/** What the JavaScript decoder makes of each record: the event or null. */
function reference(records) {
  return records.map((r) => {
    try {
      return decodeRecord(r);
    } catch (e) {
      assert.ok(e instanceof NwbError, `${e}`);
      return null;
    }
  });
}

// Records a batch frame can carry at all (a list the frame checks let
// through): the others are refused with the whole frame (the last test).
function carried(record) {
  const sub = Buffer.from('s');
  const frame = Buffer.concat([Buffer.from([0x06, 1]), sub, varint(1), list([record])]);
  try {
    decodeRelayFrameV2(frame);
    return true;
  } catch {
    return false;
  }
}

function check(all, what) {
  const records = all.filter(carried);
  assert.ok(records.length >= all.length / 2, `${what}: ${records.length} of ${all.length} carried`);
  // The module writes ASCII alone (non-ASCII characters as \u escapes).
  const parse = JSON.parse;
  let ascii = true;
  JSON.parse = (text, ...rest) => {
    ascii &&= /^[\x00-\x7f]*$/.test(text);
    return parse(text, ...rest);
  };
  let got;
  try {
    got = wasm.renderRecords(list(records), records.length).events;
  } finally {
    JSON.parse = parse;
  }
  // Asked for, the records come back beside their events, as they are.
  const again = wasm.renderRecords(list(records), records.length, null, true);
  assert.deepEqual(again.events, got);
  for (let i = 0; i < records.length; i++) {
    assert.deepEqual(again.records[i], got[i] ? records[i] : null, `${what}: record ${i} handed back`);
  }
  assert.ok(ascii, `${what}: the JSON is ASCII`);
  const want = reference(records);
  assert.equal(got.length, records.length, what);
  for (let i = 0; i < records.length; i++) {
    assert.deepEqual(got[i], want[i], `${what}: record ${i}`);
    // The keys in the order the JavaScript decoder gives them.
    if (got[i]) assert.deepEqual(Object.keys(got[i]), Object.keys(want[i]), `${what}: record ${i}`);
  }
}

test('wire vectors: valid records as their events, invalid ones null', () => {
  for (const file of ['valid', 'invalid']) {
    const cases = JSON.parse(readFileSync(resolve(repo, `vectors/wire/${file}.json`), 'utf8')).cases;
    check(cases.map((c) => unhex(c.hex)), file);
  }
});

test('random events with awkward tags and content, and their bytes mutated', () => {
  const records = Array.from({ length: 300 }, () => encodeEvent(signed()));
  check(records, 'random events');
  const mutated = [];
  for (const base of records.slice(0, 100)) {
    for (let round = 0; round < 20; round++) {
      const bytes = base.slice();
      for (let k = 1 + Math.floor(rand() * 3); k > 0; k--) bytes[Math.floor(rand() * bytes.length)] = Math.floor(rand() * 256);
      mutated.push(bytes);
    }
  }
  check(mutated, 'mutated records');
});

test('the corpus', () => {
  const events = readFileSync(resolve(repo, 'testdata/real-events.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
  check(events.map((e) => encodeEvent(e)), 'corpus');
});

test('a list that renders larger than one call writes takes several calls', () => {
  // 1,000 events of 2 KB of escapes each: about 12 MB of JSON.
  const big = finalizeEvent({ kind: 1, created_at: 1, tags: [], content: '\u0001'.repeat(2000) }, sk);
  const records = Array(1000).fill(encodeEvent(big));
  const got = wasm.renderRecords(list(records), records.length).events;
  assert.equal(got.length, 1000);
  assert.ok(got.every((e) => e.id === big.id && e.content === big.content));
});

// What a client makes of a relay frame: the JavaScript path (every record
// checked by decodeRelayFrameV2), or the WebAssembly path (the list checked
// by renderRecords): the events' ids, or the error kind.
function outcome(frame, wasmPath) {
  try {
    const f = decodeRelayFrameV2(frame, undefined, wasmPath);
    if (f.type !== 'batch') return f.type;
    if (!wasmPath) return f.records.map((r) => r.length);
    const { events } = wasm.renderRecords(f.list, f.count);
    assert.equal(events.length, f.count);
    return f.records.map((r) => r.length);
  } catch (e) {
    assert.ok(e instanceof NwbError, `${e}`);
    return e.kind;
  }
}

test('batch frames: the module refuses a record list with the error the JavaScript checks give', () => {
  const v = JSON.parse(readFileSync(resolve(repo, 'vectors/wire/transport.json'), 'utf8'));
  const frames = [...v.valid, ...v.invalid].filter((c) => c.hex).map((c) => unhex(c.hex));
  // A batch of raw, compressed and odd records, then every truncation and
  // many random byte changes of it.
  const records = Array.from({ length: 12 }, () => encodeEvent(signed()));
  const compressed = JSON.parse(readFileSync(resolve(repo, 'vectors/wire/compressed.json'), 'utf8')).cases.map((c) => unhex(c.hex));
  const body = list([...records.slice(0, 6), ...compressed, ...records.slice(6)]);
  const count = 12 + compressed.length;
  const sub = Buffer.from('sub');
  const batch = Buffer.concat([Buffer.from([0x06, sub.length]), sub, varint(count), body]);
  frames.push(batch);
  for (let cut = 1; cut < batch.length; cut += 7) frames.push(batch.subarray(0, cut));
  for (let round = 0; round < 3000; round++) {
    const f = Uint8Array.from(batch);
    for (let k = 1 + Math.floor(rand() * 2); k > 0; k--) f[6 + Math.floor(rand() * (f.length - 6))] = pick([0x00, 0x01, 0x7f, 0x80, 0x81, 0xff, Math.floor(rand() * 256)]);
    frames.push(f);
  }
  let refused = 0;
  for (const [i, f] of frames.entries()) {
    const js = outcome(f, false);
    assert.deepEqual(outcome(f, true), js, `frame ${i}`);
    if (typeof js === 'string') refused++;
  }
  assert.ok(refused > 500, `${refused} frames refused`);
});
