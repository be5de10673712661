// The shared corpus goes Rust -> JS -> Rust unchanged: `nostrwire convert
// --to nwb` writes a stream, this package decodes and re-encodes it, and
// `nostrwire convert --to json` reads the package's stream back. Compressed
// records: zstd.test.mjs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeEvents, encodeEvents, verifyEvents } from '../dist/index.js';
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
