// Every file in vectors/: nwb records byte for byte (vectors/wire), ids and
// signatures (vectors/event), and the typed error for every invalid case.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import {
  NwbError,
  decodeEvent,
  decodeRecord,
  encodeEvent,
  getEventHash,
  verifyEvent,
  initVerifier,
  useZstd,
} from '../dist/index.js';
import { zstdDecoder } from '../dist/zstd.js';

const vectors = new URL('../../vectors/', import.meta.url);
const load = (path) => JSON.parse(readFileSync(new URL(path, vectors), 'utf8'));
const hex = (bytes) => Buffer.from(bytes).toString('hex');
const unhex = (s) => new Uint8Array(Buffer.from(s, 'hex'));

function kindOf(fn) {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof NwbError, `threw ${e} instead of NwbError`);
    return e.kind;
  }
  return 'accepted';
}

const wireValid = load('wire/valid.json');
const wireInvalid = load('wire/invalid.json');
assert.equal(wireValid.format, 'nwb');
assert.equal(wireValid.version, 1);

for (const verifier of ['js', 'wasm']) {
  test(`wire/valid.json: encode, decode and verify byte-identically (${verifier} verifier)`, async () => {
    if (verifier === 'wasm') assert.ok(await initVerifier(), 'the WebAssembly verifier loads');
    for (const c of wireValid.cases) {
      const event = JSON.parse(c.json);
      assert.equal(hex(encodeEvent(event)), c.hex, `${c.name}: encode(json)`);
      if (c.input) assert.equal(hex(encodeEvent(JSON.parse(c.input))), c.hex, `${c.name}: encode(input)`);
      const decoded = decodeEvent(unhex(c.hex));
      assert.equal(JSON.stringify(decoded), c.json, `${c.name}: decode`);
      assert.equal(getEventHash(decoded), decoded.id, `${c.name}: id`);
      assert.ok(verifyEvent(decoded), `${c.name}: signature`);
    }
  });
}

// The vectors' decoder is the event record decoder (form byte 0x01 only).
test('wire/invalid.json: every case is refused with its error kind', () => {
  for (const c of wireInvalid.cases) {
    assert.equal(kindOf(() => decodeRecord(unhex(c.hex))), c.error, c.name);
  }
});

// The zstd frame inside is decoded by this package's decoder; Rust's is
// libzstd: both give each case's record, or its error kind.
test('wire/compressed.json: the record inside, or the error kind', (t) => {
  const file = load('wire/compressed.json');
  assert.ok(file.cases.length >= 2);
  useZstd(zstdDecoder);
  t.after(() => useZstd(null));
  for (const c of file.cases) {
    if (c.record) assert.equal(hex(encodeEvent(decodeEvent(unhex(c.hex)))), c.record, c.name);
    else assert.equal(kindOf(() => decodeEvent(unhex(c.hex))), c.error, c.name);
  }
});

test('every proper prefix of a valid record is refused with a typed error', () => {
  for (const c of wireValid.cases) {
    const bytes = unhex(c.hex);
    for (let n = 0; n < bytes.length; n++) {
      assert.notEqual(kindOf(() => decodeRecord(bytes.subarray(0, n))), 'accepted', `${c.name}[..${n}]`);
    }
  }
});

test('event/valid.json: canonical ids and signatures; the record round-trips', () => {
  for (const c of load('event/valid.json')) {
    const event = JSON.parse(c.json);
    assert.equal(getEventHash(event), c.id, c.name);
    assert.ok(verifyEvent(event), c.name);
    const again = decodeEvent(encodeEvent(event));
    assert.equal(JSON.stringify(again), c.canonical, c.name);
  }
});

// Cases about JSON text itself (duplicate keys, escapes, number syntax,
// nesting, size limits) belong to a JSON parser, not to this package, which
// takes parsed objects; the rest must be refused by the encoder or by
// verifyEvent.
const JSON_TEXT_KINDS = new Set([
  'duplicate_key', 'invalid_number', 'unescaped_control', 'invalid_escape',
  'trailing_data', 'syntax', 'too_deep', 'too_large', 'too_many_tags', 'invalid_utf8',
]);
const VERIFY_KINDS = new Set(['id_mismatch', 'invalid_signature', 'invalid_public_key']);

test('event/invalid.json: refused by the encoder with the same kind, or by verifyEvent', () => {
  let checked = 0;
  for (const c of load('event/invalid.json')) {
    if (JSON_TEXT_KINDS.has(c.error)) continue;
    const event = JSON.parse(c.json);
    if (VERIFY_KINDS.has(c.error)) {
      assert.equal(verifyEvent(event), false, c.name);
    } else if (c.error === 'not_an_object' || !event || typeof event !== 'object' || Array.isArray(event)) {
      assert.equal(kindOf(() => encodeEvent(event)), 'wrong_type', c.name);
    } else {
      assert.equal(kindOf(() => encodeEvent(event)), c.error, c.name);
    }
    checked++;
  }
  assert.ok(checked >= 20, `${checked} cases checked`);
});

test('hostile bytes: mutated records decode or throw NwbError, nothing else', () => {
  let seed = 0x9e3779b9;
  const rand = (n) => {
    seed ^= seed << 13; seed ^= seed >>> 17; seed ^= seed << 5;
    return (seed >>> 0) % n;
  };
  for (const c of wireValid.cases) {
    const base = unhex(c.hex);
    for (let round = 0; round < 400; round++) {
      const bytes = base.slice();
      for (let k = 1 + rand(3); k > 0; k--) bytes[139 + rand(bytes.length - 139)] = rand(256);
      const kind = kindOf(() => decodeEvent(bytes));
      if (kind === 'accepted') assert.deepEqual(encodeEvent(decodeEvent(bytes)), bytes, `${c.name}: re-encodes`);
    }
  }
});
