// Verification is strict with every verifier: an event whose id, pubkey or
// sig is not exactly 64, 64 or 128 lowercase hex characters, or whose id is
// not the hash of its canonical serialization, is refused.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { initVerifier, verifierName, verifyEvent } from '../dist/index.js';

const corpus = new URL('../../testdata/real-events.jsonl', import.meta.url);
const events = readFileSync(corpus, 'utf8')
  .split('\n')
  .filter((l) => l.trim())
  .map((l) => JSON.parse(l));

// Ways to spoil one hex field of a valid event, each of which a strict
// verifier refuses.
const spoilers = {
  'cut by one character': (s) => s.slice(0, -1),
  'cut to half': (s) => s.slice(0, s.length / 2),
  'one character added': (s) => s + '0',
  'a hex pair added': (s) => s + '00',
  'uppercase': (s) => s.toUpperCase(),
  'first character uppercase': (s) => (/[a-f]/.test(s) ? s.replace(/[a-f]/, (c) => c.toUpperCase()) : 'A' + s.slice(1)),
  'a non-hex character': (s) => 'g' + s.slice(1),
  'a space': (s) => ' ' + s.slice(1),
  'a non-ASCII character': (s) => 'é' + s.slice(1),
  'empty': () => '',
  'not a string': (s) => Array.from(s),
};

const sample = events.filter((_, i) => i % 7 === 0);

for (const verifier of ['js', 'wasm']) {
  test(`${verifier} verifier: real events pass, spoiled id, pubkey and sig are refused`, async () => {
    if (verifier === 'wasm') {
      assert.ok(await initVerifier(), 'the WebAssembly verifier loads');
      assert.equal(verifierName(), 'wasm');
    } else {
      assert.equal(verifierName(), 'js', 'this test runs before the WebAssembly verifier is loaded');
    }
    for (const e of sample) assert.ok(verifyEvent({ ...e }), `${e.id}: valid`);
    for (const field of ['id', 'pubkey', 'sig']) {
      for (const [how, spoil] of Object.entries(spoilers)) {
        let accepted = 0;
        for (const e of sample) {
          const bad = { ...e, [field]: spoil(e[field]) };
          if (verifyEvent(bad)) accepted++;
        }
        assert.equal(accepted, 0, `${field} ${how}: ${accepted} of ${sample.length} accepted`);
      }
    }
  });
}

// nwb records, as the binary transport delivers them.
import { encodeEvent, verifyRecord, verifyRecords } from '../dist/index.js';
import { packRecords, unpackRecords } from '../dist/verify.js';

test('verifyRecord and verifyRecords: real records pass; a flipped id, pubkey or sig byte and broken records fail', async () => {
  await initVerifier();
  const records = sample.map((e) => encodeEvent(e));
  assert.deepEqual(await verifyRecords(records), records.map(() => true));
  for (const r of records) assert.ok(verifyRecord(r));
  // Offsets of spec/nwb.md §3: pubkey 11, id 43, sig 75; content last.
  for (const [field, at] of [['pubkey', 11], ['id', 43], ['sig', 75], ['sig end', 138], ['last byte', -1]]) {
    const spoiled = records.map((r) => {
      const c = r.slice();
      const i = at < 0 ? c.length + at : at;
      c[i] ^= 1;
      return c;
    });
    const verdicts = await verifyRecords(spoiled);
    assert.equal(verdicts.filter(Boolean).length, 0, `${field} flipped`);
  }
  // Not records: truncated, trailing bytes, a compressed form byte, empty.
  const r = records[0];
  for (const bad of [r.subarray(0, r.length - 1), Uint8Array.of(...r, 0), Uint8Array.of(0x81, ...r.subarray(1)), new Uint8Array(0)]) {
    assert.equal(verifyRecord(bad), false);
  }
});

test('packRecords and unpackRecords round-trip views of a larger buffer', () => {
  const big = new Uint8Array(300).map((_, i) => i & 0xff);
  const parts = [big.subarray(0, 0), big.subarray(5, 17), big.subarray(100, 300)];
  const back = unpackRecords(packRecords(parts));
  assert.deepEqual(back.map((b) => Array.from(b)), parts.map((b) => Array.from(b)));
  assert.throws(() => unpackRecords(Uint8Array.of(9, 0, 0, 0, 1)), RangeError);
});

test('verifyEvents gives the event loop turns while it works, and answers in order', async () => {
  const { verifyEvents, SLICE_MS } = await import('../dist/verify.js');
  await initVerifier();
  // Enough work for many slices: the corpus three times, every fourth
  // event spoiled.
  const batch = [];
  for (let k = 0; k < 3; k++) for (const [i, e] of events.entries()) batch.push(i % 4 === 0 ? { ...e, content: e.content + ' ' } : { ...e });
  let turns = 0;
  let done = false;
  const tick = () => {
    turns++;
    if (!done) setImmediate(tick);
  };
  setImmediate(tick);
  const started = performance.now();
  const verdicts = await verifyEvents(batch);
  const ms = performance.now() - started;
  done = true;
  assert.deepEqual(verdicts, batch.map((_, j) => (j % events.length) % 4 !== 0));
  // 3,003 events are tens of slices of SLICE_MS on any machine; a loaded
  // one stretches slices, so only a few turns are demanded.
  assert.ok(turns >= 5, `${turns} turns of the event loop in ${ms.toFixed(0)} ms (slices of ${SLICE_MS} ms)`);
});

test('verifyEvents holds the thread for short turns even when every event is large', async () => {
  const { finalizeEvent } = await import('nostr-tools/pure');
  const { verifyEvents } = await import('../dist/verify.js');
  await initVerifier();
  const key = new Uint8Array(32).fill(7);
  const big = [0, 1].map((i) => finalizeEvent({ kind: 1, created_at: 1700000000 + i, tags: [['t', 'x']], content: `${i}`.repeat(1 << 20) }, key));
  // Once before the clock, so that the engine has compiled the hot code.
  assert.deepEqual(await verifyEvents(big.map((e) => ({ ...e }))), [true, true]);
  // 48 events of 1 MB each; a call into WebAssembly takes about 256 KB, not
  // 32 events (32 MB), so the longest turn stays far below 50 ms.
  const batch = Array.from({ length: 48 }, (_, i) => ({ ...big[i % 2] }));
  // Scale-free, so that a loaded machine neither hides nor fakes it: held
  // in one turn, the longest turn would be the whole call; in turns of
  // about one event each, it is a small part of it.
  const start = performance.now();
  let last = start;
  let longest = 0;
  let turns = 0;
  let done = false;
  const tick = () => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
    turns++;
    if (!done) setImmediate(tick);
  };
  setImmediate(tick);
  const verdicts = await verifyEvents(batch);
  done = true;
  const total = performance.now() - start;
  assert.deepEqual(verdicts, batch.map(() => true));
  assert.ok(turns >= 4, `the thread was given back ${turns} times`);
  assert.ok(longest < total / 4, `the longest turn took ${longest.toFixed(1)} of ${total.toFixed(1)} ms`);
});
