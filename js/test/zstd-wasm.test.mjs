// The zstd decoder inside the package's WebAssembly module
// (crates/verify-wasm, src/zstd.rs) through its exports: the compressed
// vectors, set files loaded, held and refused, the verifier's region after a
// set moves it. The decoder itself is checked against libzstd by
// `cargo test -p nostrwire-verify-wasm`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { VERIFIER_WASM } from '../dist/verifier-wasm-bytes.js';
import { loadVerifier } from '../dist/verify-wasm.js';
import { parseDictionarySet } from '../dist/zstd.js';
import { bin, haveBinary } from './relay-process.mjs';
import { streamBatches } from './helpers.mjs';

const vectors = JSON.parse(readFileSync(new URL('../../vectors/wire/compressed.json', import.meta.url), 'utf8')).cases;
const hex = (s) => Uint8Array.from(s.match(/../g) ?? [], (b) => parseInt(b, 16));

async function instance() {
  const { instance } = await WebAssembly.instantiate(Buffer.from(VERIFIER_WASM, 'base64'), {});
  return instance.exports;
}

// A compressed record's D, R and frame (§11; one-byte varints here).
function split(record) {
  let p = 1;
  const varint = () => {
    let v = 0;
    for (let shift = 0; ; shift += 7) {
      const b = record[p++];
      v += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return v;
    }
  };
  const d = varint();
  const r = varint();
  return { d, r, frame: record.subarray(p) };
}

function decompress(x, d, frame, size) {
  const at = x.nw_reserve(0, frame.length + size);
  new Uint8Array(x.memory.buffer).set(frame, at);
  const rc = x.nw_zstd_decompress(d, frame.length, size);
  return rc === 0 ? new Uint8Array(x.memory.buffer).slice(at + frame.length, at + frame.length + size) : rc;
}

function load(x, set) {
  const at = x.nw_reserve(0, set.length);
  new Uint8Array(x.memory.buffer).set(set, at);
  return x.nw_zstd_load_set(set.length);
}

// A set file (§11.2) of raw-content dictionaries: [id, selector, bytes].
function setFile(level, entries) {
  const out = [...Buffer.from('NWBD'), 1, level];
  const varint = (v) => {
    for (; v >= 0x80; v = Math.floor(v / 128)) out.push((v & 0x7f) | 0x80);
    out.push(v);
  };
  varint(entries.length);
  for (const [id, selector, bytes] of entries) {
    varint(id);
    varint(selector);
    varint(bytes.length);
    for (const b of bytes) out.push(b);
  }
  return Uint8Array.from(out);
}

function sha256(x, message) {
  const at = x.nw_reserve(32, 4 + message.length);
  const mem = new Uint8Array(x.memory.buffer);
  new DataView(x.memory.buffer).setUint32(at, message.length, true);
  mem.set(message, at + 4);
  assert.equal(x.nw_sha256_many(1, 4 + message.length), 1);
  return Buffer.from(new Uint8Array(x.memory.buffer).slice(x.nw_verdicts(), x.nw_verdicts() + 32)).toString('hex');
}

test('the compressed vectors decompress to their record, or are refused', async () => {
  const x = await instance();
  assert.ok(vectors.length >= 2);
  for (const c of vectors) {
    const { d, r, frame } = split(hex(c.hex));
    const got = decompress(x, d, frame, r);
    if (c.record) assert.deepEqual(got, hex(c.record), c.name);
    else assert.equal(got, -3, `${c.name}: malformed (a checksum)`);
    // One byte short or over: another size.
    assert.ok(decompress(x, d, frame, r + 1) < 0, c.name);
    assert.ok(decompress(x, d, frame.subarray(0, frame.length - 1), r) < 0, c.name);
  }
});

test('sets load, the one loaded last is in use, and a refused set leaves the one in use', async () => {
  const x = await instance();
  const { d, r, frame } = split(hex(vectors.find((c) => c.record).hex));
  const record = hex(vectors.find((c) => c.record).record);
  assert.equal(decompress(x, 7, frame, r), -2, 'unknown dictionary before any set');
  const raw = new TextEncoder().encode('a raw content dictionary');
  assert.equal(load(x, setFile(3, [[7, 0, raw], [9, 2, raw]])), 2);
  // A raw-content dictionary only adds history the frame never refers to.
  assert.deepEqual(decompress(x, d, frame, r), record);
  assert.equal(decompress(x, 8, frame, r), -2);
  // Each rule of §11.2 refused, the loaded set kept.
  for (const bad of [
    setFile(0, []),
    setFile(3, [[0, 0, raw]]),
    setFile(3, [[7, 0, raw], [7, 1, raw]]),
    setFile(3, [[7, 0, raw], [8, 0, raw]]),
    setFile(3, [[7, 0, raw]]).subarray(0, 20),
    Uint8Array.from([...setFile(3, [[7, 0, raw]]), 0]),
    Uint8Array.from([...Buffer.from('NWBX'), 1, 3, 0]),
  ]) {
    assert.equal(load(x, bad), -7, String(bad));
  }
  assert.equal(load(x, setFile(3, [[9, 0, Uint8Array.from([0x37, 0xa4, 0x30, 0xec, 1, 0, 0, 0, ...new Array(40).fill(0xff)])]])), -8);
  assert.equal(decompress(x, 9, frame, r).length, r, 'the loaded set is still there');
  assert.equal(load(x, setFile(5, [[11, 0, raw]])), 1);
  assert.equal(decompress(x, 9, frame, r), -2, 'the new set is in use');
  assert.deepEqual(decompress(x, 11, frame, r), record);
});

test('the verifier region works before and after a set moves it', async () => {
  const x = await instance();
  const message = new TextEncoder().encode('abc');
  const want = createHash('sha256').update(message).digest('hex');
  assert.equal(sha256(x, message), want);
  const before = x.nw_reserve(0, 0);
  assert.equal(load(x, setFile(3, [[1, 0, new Uint8Array(200_000).fill(42)]])), 1);
  const after = x.nw_reserve(0, 0);
  assert.ok(after > before + 200_000, 'the region starts after the set');
  assert.equal(sha256(x, message), want);
  // A second set is held beside the first: the region starts after both.
  assert.equal(load(x, setFile(3, [])), 0);
  assert.ok(x.nw_reserve(0, 0) > after);
  assert.equal(sha256(x, message), want);
});

// One raw-content dictionary of `size` bytes, id `id`.
function bigSet(id, size) {
  const head = setFile(3, [[id, 0, []]]);
  // The entry's length (0) is the last byte: written again for `size`.
  const len = [];
  for (let v = size; ; v = Math.floor(v / 128)) {
    len.push(v >= 0x80 ? (v & 0x7f) | 0x80 : v);
    if (v < 0x80) break;
  }
  return Buffer.concat([head.subarray(0, head.length - 1), Buffer.from(len), Buffer.alloc(size, id)]);
}

test('the module holds four sets: each used again without loading it, a fifth replaces the one loaded last', async () => {
  const x = await instance();
  const { r, frame } = split(hex(vectors.find((c) => c.record).hex));
  const record = hex(vectors.find((c) => c.record).record);
  const raw = new TextEncoder().encode('a raw content dictionary');
  // Set k holds only dictionary 20 + k; a frame that does not refer to its
  // dictionary decompresses with any of them.
  const only = (k) => {
    for (let id = 20; id < 25; id++) {
      const got = decompress(x, id, frame, r);
      if (id === 20 + k) assert.deepEqual(got, record, `set ${k}: dictionary ${id}`);
      else assert.equal(got, -2, `set ${k}: dictionary ${id}`);
    }
  };
  for (let k = 0; k < 4; k++) {
    assert.equal(load(x, setFile(3, [[20 + k, 0, raw]])), 1);
    assert.equal(x.nw_zstd_sets(), k + 1);
    only(k);
  }
  for (const k of [0, 2, 1, 3, 0]) {
    assert.equal(x.nw_zstd_use_set(k), 0);
    only(k);
  }
  assert.equal(x.nw_zstd_use_set(4), -1, 'no fifth set');
  only(0);
  assert.equal(x.nw_zstd_use_set(0xffff_ffff), 0, 'no dictionaries');
  only(-1);
  assert.equal(load(x, setFile(3, [[24, 0, raw]])), 1);
  assert.equal(x.nw_zstd_sets(), 4);
  only(4);
  assert.equal(x.nw_zstd_use_set(2), 0);
  only(2);
  // A set refused for its structure leaves them all, and the one in use.
  assert.equal(load(x, setFile(3, [[7, 0, raw], [7, 1, raw]])), -7);
  assert.equal(x.nw_zstd_sets(), 4);
  only(2);
});

test('the held sets take at most 64 MiB together: a set that does not fit replaces the sets loaded last', async () => {
  const x = await instance();
  const { r, frame } = split(hex(vectors.find((c) => c.record).hex));
  const size = 16 << 20;
  for (let k = 0; k < 3; k++) assert.equal(load(x, bigSet(30 + k, size)), 1);
  assert.equal(x.nw_zstd_sets(), 3);
  // Three sets of 16 MiB and their tables leave no room for a fourth.
  assert.equal(load(x, bigSet(33, size)), 1);
  assert.equal(x.nw_zstd_sets(), 3);
  assert.equal(decompress(x, 33, frame, r).length, r);
  assert.equal(x.nw_zstd_use_set(2), 0);
  assert.equal(decompress(x, 32, frame, r), -2, 'the third set made way');
  assert.equal(decompress(x, 33, frame, r).length, r);
  assert.equal(x.nw_zstd_use_set(0), 0);
  assert.equal(decompress(x, 30, frame, r).length, r);
});

test("three relays' sets at once: batches that take turns decode with their own set, each set prepared once", { skip: !haveBinary && 'no nostrwire binary (set NOSTRWIRE_BIN)' }, async (t) => {
  const corpus = new URL('../../testdata/real-events.jsonl', import.meta.url).pathname;
  const events = readFileSync(corpus, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  const dir = mkdtempSync(join(tmpdir(), 'nostrwire-js-sets-'));
  // Dictionaries of other sizes: the same ids, other bytes, so a batch
  // read with another relay's set would not decode to its events.
  const relays = [65536, 32768, 16384].map((max) => {
    const set = join(dir, `${max}.nwbd`);
    const stream = join(dir, `${max}.nwb`);
    execFileSync(bin, ['dict', 'train', '--per-kind', '--max-dict-bytes', String(max), '--corpus', corpus, '-o', set], { stdio: 'ignore' });
    execFileSync(bin, ['convert', '--to', 'nwb', '--dict', set, '-o', stream, corpus], { stdio: 'ignore' });
    return { set: new Uint8Array(readFileSync(set)), batches: streamBatches(new Uint8Array(readFileSync(stream))) };
  });
  const ids = relays.map((r) => parseDictionarySet(r.set).dictionaries.map((d) => d.id).join());
  assert.equal(new Set(ids).size, 1, 'the sets name the same ids');
  // The module's loads, counted on its exports.
  let loads = 0;
  const instantiate = WebAssembly.instantiate;
  WebAssembly.instantiate = async (...args) => {
    const instance = await instantiate(...args);
    const load = instance.exports.nw_zstd_load_set;
    return { exports: { ...instance.exports, nw_zstd_load_set: (len) => (loads++, load(len)) } };
  };
  t.after(() => (WebAssembly.instantiate = instantiate));
  const v = await loadVerifier();
  const got = relays.map(() => []);
  for (let i = 0; i < Math.max(...relays.map((r) => r.batches.length)); i++) {
    relays.forEach((r, k) => {
      const b = r.batches[i];
      if (b) got[k].push(...v.renderRecords(b.list, b.count, r.set).events);
    });
  }
  for (const g of got) assert.deepEqual(g, events);
  assert.ok(relays.every((r) => r.batches.length > 5));
  assert.equal(loads, 3);
});
