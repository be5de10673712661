// The zstd decoder inside the package's WebAssembly module
// (crates/verify-wasm, src/zstd.rs) through its exports: the compressed
// vectors, set files loaded and refused, and the verifier's region after a
// set moves it. The decoder itself is checked against libzstd by
// `cargo test -p nostrwire-verify-wasm`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { VERIFIER_WASM } from '../dist/verifier-wasm-bytes.js';

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

test('sets load, replace each other, and a refused set leaves the loaded one', async () => {
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
  assert.equal(decompress(x, 9, frame, r), -2, 'replaced');
  assert.deepEqual(decompress(x, 11, frame, r), record);
});

test('the verifier region works before and after a set moves it', async () => {
  const x = await instance();
  const message = new TextEncoder().encode('abc');
  const want = createHash('sha256').update(message).digest('hex');
  assert.equal(sha256(x, message), want);
  const before = x.nw_reserve(0, 0);
  assert.equal(load(x, setFile(3, [[1, 0, new Uint8Array(200_000).fill(42)]])), 1);
  assert.ok(x.nw_reserve(0, 0) > before + 200_000, 'the region starts after the set');
  assert.equal(sha256(x, message), want);
  assert.equal(load(x, setFile(3, [])), 0);
  assert.ok(x.nw_reserve(0, 0) < before + 200_000, 'and moves back');
  assert.equal(sha256(x, message), want);
});
