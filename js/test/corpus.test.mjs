// The shared corpus goes Rust -> JS -> Rust unchanged: `nostrwire convert
// --to nwb` writes a stream, this package decodes and re-encodes it, and
// `nostrwire convert --to json` reads the package's stream back.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NwbError, decodeEvent, decodeEvents, encodeEvent, encodeEvents, useZstd, verifyEvents } from '../dist/index.js';
import { zstdDecoder } from '../dist/zstd.js';
import { bin, haveBinary } from './relay-process.mjs';

const corpus = new URL('../../testdata/real-events.jsonl', import.meta.url).pathname;
const skip = !haveBinary && 'no nostrwire binary (set NOSTRWIRE_BIN)';
const run = (...args) => execFileSync(bin, args, { maxBuffer: 1 << 28 });

test('corpus: Rust -> JS -> Rust, byte for byte', { skip }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'nostrwire-js-corpus-'));
  const rust = join(dir, 'rust.nwb');
  run('convert', '--to', 'nwb', '-o', rust, corpus);
  const bytes = new Uint8Array(readFileSync(rust));
  const events = decodeEvents(bytes);
  const lines = readFileSync(corpus, 'utf8').split('\n').filter((l) => l.trim());
  assert.equal(events.length, lines.length);

  // JS re-encodes Rust's stream to the same bytes.
  const again = encodeEvents(events);
  assert.equal(Buffer.compare(Buffer.from(again), Buffer.from(bytes)), 0);
  // JS encodes the corpus JSON to the same bytes as Rust.
  assert.equal(Buffer.compare(Buffer.from(encodeEvents(lines.map((l) => JSON.parse(l)))), Buffer.from(bytes)), 0);

  // Rust reads the JS stream back to the canonical JSON it reads from its own.
  const js = join(dir, 'js.nwb');
  writeFileSync(js, again);
  const fromJs = run('convert', '--to', 'json', js).toString();
  const fromRust = run('convert', '--to', 'json', rust).toString();
  assert.equal(fromJs, fromRust);
  // ... which is what JSON.stringify of the decoded events gives.
  assert.equal(fromJs, events.map((e) => JSON.stringify(e)).join('\n') + '\n');

  const verdicts = await verifyEvents(events);
  assert.equal(verdicts.filter(Boolean).length, events.length);
});

test('dictionary-compressed records are refused with unknown_dictionary', { skip }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'nostrwire-js-dict-'));
  const dicts = join(dir, 'set.nwbd');
  run('dict', 'train', '--corpus', corpus, '-o', dicts);
  const out = join(dir, 'compressed.nwb');
  run('convert', '--to', 'nwb', '--dict', dicts, '-o', out, corpus);
  const bytes = new Uint8Array(readFileSync(out));
  assert.throws(() => decodeEvents(bytes), (e) => e instanceof NwbError && e.kind === 'unknown_dictionary');
});

let zstd = null;
try {
  execFileSync('zstd', ['--version']);
  zstd = 'zstd';
} catch {}

test('compressed records without a dictionary decode (zstd, magicless frame)', { skip: !zstd && 'no zstd command' }, () => {
  const event = JSON.parse(readFileSync(corpus, 'utf8').split('\n')[3]);
  const record = encodeEvent(event);
  const frame = execFileSync('zstd', ['-q', '-c', '--no-check', '-19'], { input: record });
  const envelope = new Uint8Array([0x81, 0x00, ...varint(record.length), ...frame.subarray(4)]);
  // The core carries no zstd decoder until one is set.
  useZstd(null);
  assert.throws(() => decodeEvent(envelope), (e) => e instanceof NwbError && e.kind === 'decompress');
  useZstd(zstdDecoder);
  assert.deepEqual(decodeEvent(envelope), event);

  const wrongSize = new Uint8Array([0x81, 0x00, ...varint(record.length - 1), ...frame.subarray(4)]);
  assert.throws(() => decodeEvent(wrongSize), (e) => e instanceof NwbError && e.kind === 'decompress');
  const garbage = new Uint8Array([0x81, 0x00, ...varint(record.length), 0x20, 0x55, 0x01, 0x02]);
  assert.throws(() => decodeEvent(garbage), (e) => e instanceof NwbError && e.kind === 'decompress');
  const nested = new Uint8Array([0x81, 0x00, 0x01, ...execFileSync('zstd', ['-q', '-c', '--no-check'], { input: Buffer.from([0x81]) }).subarray(4)]);
  assert.throws(() => decodeEvent(nested), (e) => e instanceof NwbError && e.kind === 'bad_version');
});

function varint(n) {
  const out = [];
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return out;
}
