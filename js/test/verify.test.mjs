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
