// Compressed records (spec/nwb.md §11) and dictionary set files (§11.2):
// the corpus compressed by `nostrwire convert --to nwb --dict` with sets from
// `nostrwire dict train` decodes to the corpus events; hostile sets and
// records give NwbError and nothing else.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  DEFAULT_LIMITS,
  NwbError,
  decodeEvent,
  decodeEvents,
  encodeEvent,
  encodeEvents,
  getEventHash,
  useZstd,
} from '../dist/index.js';
import { parseDictionarySet, zstdDecoder, zstdDecoderWithDictionaries } from '../dist/zstd.js';
import { bin, haveBinary } from './relay-process.mjs';
import { varint } from './helpers.mjs';

const corpus = new URL('../../testdata/real-events.jsonl', import.meta.url).pathname;
const events = readFileSync(corpus, 'utf8')
  .split('\n')
  .filter((l) => l.trim())
  .map((l) => JSON.parse(l));
const skip = !haveBinary && 'no nostrwire binary (set NOSTRWIRE_BIN)';
const run = (...args) => execFileSync(bin, args, { maxBuffer: 1 << 28 });
const dir = mkdtempSync(join(tmpdir(), 'nostrwire-js-zstd-'));
const read = (f) => new Uint8Array(readFileSync(f));

/** A dictionary set and the corpus compressed with it, by the CLI. */
const made = {};
function make(name, perKind) {
  if (made[name]) return made[name];
  const set = join(dir, `${name}.nwbd`);
  const stream = join(dir, `${name}.nwb`);
  run('dict', 'train', ...(perKind ? ['--per-kind'] : []), '--corpus', corpus, '-o', set);
  run('convert', '--to', 'nwb', '--dict', set, '-o', stream, corpus);
  return (made[name] = { setFile: set, streamFile: stream, set: read(set), stream: read(stream) });
}

/** The frames of a stream (§10). */
function frames(bytes) {
  const out = [];
  let p = 0;
  while (p < bytes.length) {
    let len = 0;
    let shift = 0;
    let b;
    do {
      b = bytes[p++];
      len += (b & 0x7f) * 2 ** shift;
      shift += 7;
    } while (b & 0x80);
    out.push(bytes.subarray(p, p + len));
    p += len;
  }
  return out;
}


/** A compressed record's header fields and payload. */
function envelope(record) {
  let p = 1;
  const field = () => {
    let v = 0;
    let shift = 0;
    let b;
    do {
      b = record[p++];
      v += (b & 0x7f) * 2 ** shift;
      shift += 7;
    } while (b & 0x80);
    return v;
  };
  const dictionary = field();
  const size = field();
  return { dictionary, size, payload: record.subarray(p) };
}
const compressedRecord = (dictionary, size, payload) =>
  new Uint8Array([0x81, ...varint(dictionary), ...varint(size), ...payload]);

/** A set file (§11.2) from parts, for hostile cases. */
function setFile({ magic = [0x4e, 0x57, 0x42, 0x44], version = 1, level = 19, count, entries }) {
  const body = [];
  for (const e of entries) body.push(...varint(e.id), ...varint(e.selector), ...varint(e.length ?? e.bytes.length), ...e.bytes);
  return new Uint8Array([...magic, version, level & 0xff, ...varint(count ?? entries.length), ...body]);
}

const isNwbError = (kind) => (e) => {
  assert.ok(e instanceof NwbError, `not an NwbError: ${e}`);
  if (kind) assert.equal(e.kind, kind, e.message);
  return true;
};

for (const [name, perKind] of [
  ['per-kind', true],
  ['fallback', false],
]) {
  test(`corpus compressed by the CLI with a ${name} dictionary set decodes to the corpus events`, { skip }, () => {
    const { setFile: setPath, streamFile, set, stream } = make(name, perKind);
    const parsed = parseDictionarySet(set);
    assert.equal(parsed.level, 19);
    assert.equal(parsed.dictionaries.filter((d) => d.kind === null).length, 1);
    if (perKind) assert.ok(parsed.dictionaries.length > 5, `${parsed.dictionaries.length} dictionaries`);
    else assert.equal(parsed.dictionaries.length, 1);

    // Nearly every record is stored compressed, under every dictionary of the set.
    const records = frames(stream);
    const compressed = records.filter((r) => r[0] === 0x81);
    assert.equal(records.length, events.length);
    assert.ok(compressed.length > 0.9 * records.length, `${compressed.length} of ${records.length} compressed`);
    // (Every kind of the corpus has its own dictionary in the per-kind set.)
    const used = new Set(compressed.map((r) => envelope(r).dictionary));
    const own = parsed.dictionaries.filter((d) => (perKind ? d.kind !== null : true)).map((d) => d.id);
    assert.deepEqual([...used].sort((a, b) => a - b), own.sort((a, b) => a - b));

    // Without the set, the records name dictionaries the reader lacks.
    useZstd(null);
    assert.throws(() => decodeEvents(stream), isNwbError('unknown_dictionary'));
    useZstd(zstdDecoder);
    assert.throws(() => decodeEvents(stream), isNwbError('unknown_dictionary'));

    useZstd(zstdDecoderWithDictionaries(set));
    const decoded = decodeEvents(stream);
    assert.equal(decoded.length, events.length);
    for (let i = 0; i < events.length; i++) {
      assert.deepEqual(decoded[i], events[i], `event ${i}`);
      assert.equal(getEventHash(decoded[i]), decoded[i].id, `event ${i}: id re-hashed`);
    }
    // The records inside are the canonical ones, as Rust writes them uncompressed.
    const raw = join(dir, `${name}-raw.nwb`);
    run('convert', '--to', 'nwb', '-o', raw, corpus);
    assert.equal(Buffer.compare(Buffer.from(encodeEvents(decoded)), readFileSync(raw)), 0);
    // Rust reads the same stream to the same JSON.
    assert.equal(run('convert', '--to', 'json', '--dict', setPath, streamFile).toString(), decoded.map((e) => JSON.stringify(e)).join('\n') + '\n');
    // The parsed set serves as well as its bytes.
    useZstd(zstdDecoderWithDictionaries(parsed));
    assert.deepEqual(decodeEvents(stream), decoded);
    useZstd(null);
  });
}

test('hostile dictionary set files are bad_dictionary_set', { skip }, () => {
  const { set } = make('per-kind', true);
  const bad = isNwbError('bad_dictionary_set');
  // Truncated anywhere (every length in the first 256 bytes, then a stride).
  for (let n = 0; n < set.length; n += n < 256 ? 1 : 997) {
    assert.throws(() => parseDictionarySet(set.subarray(0, n)), bad, `prefix ${n}`);
    if (n % 7 === 0) assert.throws(() => zstdDecoderWithDictionaries(set.subarray(0, n)), bad, `prefix ${n}`);
  }
  assert.throws(() => parseDictionarySet(new Uint8Array([...set, 0])), bad, 'a byte after the set');

  const dict = parseDictionarySet(set).dictionaries[0].bytes;
  const one = (over) => setFile({ entries: [{ id: 1, selector: 0, bytes: dict }], ...over });
  assert.equal(zstdDecoderWithDictionaries(one({})).length, 3);
  const cases = {
    'bad magic': one({ magic: [0x4e, 0x57, 0x42, 0x45] }),
    'version 2': one({ version: 2 }),
    'level 0': one({ level: 0 }),
    'level 20': one({ level: 20 }),
    'level -1': one({ level: -1 }),
    'id 0': setFile({ entries: [{ id: 0, selector: 0, bytes: dict }] }),
    'id 2^32': setFile({ entries: [{ id: 2 ** 32, selector: 0, bytes: dict }] }),
    'duplicate id': setFile({ entries: [{ id: 1, selector: 0, bytes: dict }, { id: 1, selector: 2, bytes: dict }] }),
    'two fallbacks': setFile({ entries: [{ id: 1, selector: 0, bytes: dict }, { id: 2, selector: 0, bytes: dict }] }),
    'two for kind 1': setFile({ entries: [{ id: 1, selector: 2, bytes: dict }, { id: 2, selector: 2, bytes: dict }] }),
    'kind 65536': setFile({ entries: [{ id: 1, selector: 65537, bytes: dict }] }),
    'length past the end': setFile({ entries: [{ id: 1, selector: 0, length: dict.length + 1, bytes: dict }] }),
    'length over 16 MiB': setFile({ entries: [{ id: 1, selector: 0, length: 2 ** 24 + 1, bytes: [] }] }),
    'count 2^50, nothing allocated': setFile({ count: 2 ** 50, entries: [] }),
    'count above the entries': setFile({ count: 2, entries: [{ id: 1, selector: 0, bytes: dict }] }),
    'overlong varint': new Uint8Array([0x4e, 0x57, 0x42, 0x44, 1, 19, 0x81, 0x00, 1, 0, 0]),
    'varint past 64 bits': new Uint8Array([0x4e, 0x57, 0x42, 0x44, 1, 19, ...new Array(11).fill(0xff), 0]),
    'malformed entropy tables': one({ entries: [{ id: 1, selector: 0, bytes: [...dict.subarray(0, 8), ...new Array(64).fill(0xff)] }] }),
    'truncated entropy tables': one({ entries: [{ id: 1, selector: 0, bytes: dict.subarray(0, 40) }] }),
  };
  for (const [what, bytes] of Object.entries(cases)) {
    assert.throws(() => zstdDecoderWithDictionaries(bytes), bad, what);
  }
  for (const notASet of ['NWBD', null, {}, { dictionaries: [{ id: 1, kind: null, bytes: 'x' }] }]) {
    assert.throws(() => zstdDecoderWithDictionaries(notASet), isNwbError('wrong_type'));
  }
  // Entropy tables are checked when the set is prepared, not when parsed.
  assert.equal(parseDictionarySet(cases['malformed entropy tables']).dictionaries.length, 1);
});

test('hostile compressed records give NwbError', { skip }, () => {
  const { set, stream } = make('per-kind', true);
  const ids = parseDictionarySet(set).dictionaries.map((d) => d.id);
  useZstd(zstdDecoderWithDictionaries(set));
  const compressed = frames(stream).filter((r) => r[0] === 0x81);
  const sample = compressed.filter((_, i) => i % 10 === 0);

  // A dictionary the set lacks.
  const missing = Math.max(...ids) + 1;
  for (const r of sample) {
    const { size, payload } = envelope(r);
    assert.throws(() => decodeEvent(compressedRecord(missing, size, payload)), isNwbError('unknown_dictionary'));
    assert.throws(() => decodeEvent(compressedRecord(2 ** 32 + 5, size, payload)), isNwbError('unknown_dictionary'));
  }
  // Another dictionary of the set: zstd cannot tell, the result is refused
  // by zstd or by the record decoder, never anything but NwbError.
  let wrong = 0;
  let decoded = 0;
  for (const r of sample) {
    const { dictionary, size, payload } = envelope(r);
    for (const id of ids) {
      if (id === dictionary) continue;
      wrong++;
      try {
        decodeEvent(compressedRecord(id, size, payload));
        decoded++;
      } catch (e) {
        isNwbError()(e);
      }
    }
  }
  assert.ok(decoded <= wrong / 100, `${decoded} of ${wrong} records decoded with another dictionary`);

  for (const r of sample) {
    const { dictionary, size, payload } = envelope(r);
    const decompress = isNwbError('decompress');
    // Truncated frames, a byte after the frame, a wrong size.
    for (let n = 0; n < payload.length; n += Math.max(1, payload.length >> 5)) {
      assert.throws(() => decodeEvent(compressedRecord(dictionary, size, payload.subarray(0, n))), decompress);
    }
    assert.throws(() => decodeEvent(compressedRecord(dictionary, size, [...payload, 0])), decompress);
    assert.throws(() => decodeEvent(compressedRecord(dictionary, size + 1, payload)), decompress);
    assert.throws(() => decodeEvent(compressedRecord(dictionary, size - 1, payload)), decompress);
    // The first block's header made a reserved block type.
    const reserved = new Uint8Array(payload);
    const blockAt = 1 + (reserved[0] & 0x20 ? 0 : 1) + [0, 1, 2, 4][reserved[0] & 3] + (reserved[0] >> 6 ? 1 << (reserved[0] >> 6) : reserved[0] & 0x20 ? 1 : 0);
    reserved[blockAt] |= 0x06;
    assert.throws(() => decodeEvent(compressedRecord(dictionary, size, reserved)), decompress);
    // Every single-bit flip (in a quarter of the sample): an NwbError or
    // an event, nothing else.
    for (let i = 0; r[2] % 4 === 0 && i < payload.length; i++) {
      const flipped = new Uint8Array(payload);
      flipped[i] ^= 1 << (i % 8);
      try {
        decodeEvent(compressedRecord(dictionary, size, flipped));
      } catch (e) {
        isNwbError()(e);
      }
    }
  }
  // The record size is checked before anything is allocated.
  const { dictionary, payload } = envelope(compressed[0]);
  assert.throws(() => decodeEvent(compressedRecord(dictionary, DEFAULT_LIMITS.maxRecordBytes + 1, payload)), isNwbError('record_too_large'));
  assert.throws(() => decodeEvent(compressedRecord(dictionary, 2 ** 50, payload)), isNwbError('record_too_large'));
  // A stream cut inside a frame.
  assert.throws(() => decodeEvents(stream.subarray(0, stream.length - 1)), isNwbError('truncated'));
  useZstd(null);
});

let zstdCli = null;
try {
  execFileSync('zstd', ['--version']);
  zstdCli = 'zstd';
} catch {}

test('compressed records without a dictionary decode (zstd, magicless frame)', { skip: !zstdCli && 'no zstd command' }, () => {
  const event = events[3];
  const record = encodeEvent(event);
  const frame = execFileSync('zstd', ['-q', '-c', '--no-check', '-19'], { input: record });
  const envelope0 = new Uint8Array([0x81, 0x00, ...varint(record.length), ...frame.subarray(4)]);
  // The core carries no zstd decoder until one is set.
  useZstd(null);
  assert.throws(() => decodeEvent(envelope0), isNwbError('decompress'));
  for (const decoder of [zstdDecoder, zstdDecoderWithDictionaries(setFile({ entries: [] }))]) {
    useZstd(decoder);
    assert.deepEqual(decodeEvent(envelope0), event);
    const wrongSize = new Uint8Array([0x81, 0x00, ...varint(record.length - 1), ...frame.subarray(4)]);
    assert.throws(() => decodeEvent(wrongSize), isNwbError('decompress'));
    const garbage = new Uint8Array([0x81, 0x00, ...varint(record.length), 0x20, 0x55, 0x01, 0x02]);
    assert.throws(() => decodeEvent(garbage), isNwbError('decompress'));
    const nested = new Uint8Array([0x81, 0x00, 0x01, ...execFileSync('zstd', ['-q', '-c', '--no-check'], { input: Buffer.from([0x81]) }).subarray(4)]);
    assert.throws(() => decodeEvent(nested), isNwbError('bad_version'));
  }
  useZstd(null);
});

test('zstd frames of every shape decode as the zstd command wrote them', { skip: !zstdCli && 'no zstd command' }, () => {
  // Larger than a block (128 KiB), a dictionary of the CLI's set (with
  // its content size and dictionary id in the frame, as zstd writes them),
  // levels from fast to ultra: raw, RLE and compressed blocks, 1 and 4
  // Huffman streams, every FSE table mode.
  const raw = encodeEvents(events);
  const inputs = [raw.subarray(0, 300), raw.subarray(0, 300_000), new TextEncoder().encode('nostr '.repeat(50_000))];
  const dictPath = haveBinary ? make('fallback', false).setFile : null;
  const dicts = [null];
  if (dictPath) {
    const bytes = parseDictionarySet(read(dictPath)).dictionaries[0].bytes;
    const file = join(dir, 'fallback.dict');
    writeFileSync(file, bytes);
    dicts.push({ file, set: setFile({ entries: [{ id: 7, selector: 0, bytes }] }) });
  }
  for (const input of inputs) {
    for (const level of ['--fast=5', '-3', '-19', '--ultra -22']) {
      for (const dict of dicts) {
        // --no-check: spec/nwb.md §11 frames carry no checksum (refused below).
        const args = ['-q', '-c', '--no-check', ...level.split(' '), ...(dict ? ['-D', dict.file] : [])];
        const frame = execFileSync('zstd', args, { input, maxBuffer: 1 << 26 });
        const out = new Uint8Array(input.length);
        const decoder = dict ? zstdDecoderWithDictionaries(dict.set) : zstdDecoder;
        assert.equal(decoder(frame.subarray(4), out, dict ? 7 : 0), input.length, args.join(' '));
        assert.equal(Buffer.compare(Buffer.from(out), Buffer.from(input)), 0, args.join(' '));
      }
    }
  }
  // What zstd writes by default, with its checksum, is not a record's frame.
  const input = inputs[0];
  const checked = execFileSync('zstd', ['-q', '-c', '--check'], { input });
  assert.throws(() => zstdDecoder(checked.subarray(4), new Uint8Array(input.length), 0), /content checksum flag set/);
});
