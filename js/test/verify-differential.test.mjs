// The WebAssembly verifier against two references on the same inputs:
// @noble/curves (nostr-tools' verifyEvent, with the strict hex shape) and
// the Rust codec (`nostrwire verify`), over random signed events with
// awkward tags and content and mutations of them (ids, keys, signatures,
// fields) and the event objects of vectors/event, as events and as nwb
// records; the same in headless Chromium, main thread and two workers, and
// under a policy that forbids WebAssembly; and BIP-340's official vectors.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { finalizeEvent, verifyEvent as nobleVerify } from 'nostr-tools/pure';
import { decodeRecord, encodeEvent, initVerifier, verifierName, verifyEvents, verifyRecords } from '../dist/index.js';
import { loadVerifier } from '../dist/verify-wasm.js';
import { seeded } from './helpers.mjs';
import { bin, haveBinary } from './relay-process.mjs';
import { bundlePage, serveDir, launch, openPage, haveChromium } from './browser/harness.mjs';

// A small seeded generator: the same cases on every run.
const rand = seeded(0x9e3779b9);
const pick = (xs) => xs[Math.floor(rand() * xs.length)];
const hexOf = (n) => Array.from({ length: n }, () => '0123456789abcdef'[Math.floor(rand() * 16)]).join('');
const bytes = (n) => Uint8Array.from({ length: n }, () => Math.floor(rand() * 256));
const PIECES = ['a', 'Z', ' ', '"', '\\', '\n', '\r', '\t', '\b', '\f', '\u0000', '\u0001', '\u001f', '\u007f', 'é', '\u2028', '日本', '😀', '</script>', '\\u0041', '{"k":[1]}'];
const text = (max) => Array.from({ length: Math.floor(rand() * max) }, () => pick(PIECES)).join('');
const tagValue = () => pick([hexOf(64), hexOf(2), hexOf(10), hexOf(40), hexOf(98), hexOf(200), hexOf(64).toUpperCase(), '', text(6), String(Math.floor(rand() * 2e9)), 'wss://relay.example/', hexOf(31)]);
const tag = () => [pick(['e', 'p', 't', 'a', 'd', 'x', 'emoji', '', 'E', text(3)]), ...Array.from({ length: Math.floor(rand() * 4) }, tagValue)];

const keys = Array.from({ length: 12 }, () => bytes(32));
function signed() {
  return finalizeEvent(
    {
      kind: pick([0, 1, 3, 6, 7, 1059, 30023, 65535]),
      created_at: pick([0, 1, 1700000000 + Math.floor(rand() * 1e8), 2 ** 53 - 1]),
      tags: Array.from({ length: Math.floor(rand() * 6) }, tag),
      content: rand() < 0.1 ? text(400) : text(30),
    },
    pick(keys),
  );
}

const flip = (s, i) => s.slice(0, i) + (s[i] === '0' ? '1' : '0') + s.slice(i + 1);
const MUTATIONS = [
  (e) => ({ ...e, id: flip(e.id, Math.floor(rand() * 64)) }),
  (e) => ({ ...e, id: e.id.slice(0, 63) }),
  (e) => ({ ...e, id: e.id + '0' }),
  (e) => ({ ...e, id: e.id.toUpperCase() }),
  (e) => ({ ...e, pubkey: flip(e.pubkey, Math.floor(rand() * 64)) }),
  (e) => ({ ...e, pubkey: e.pubkey.toUpperCase() }),
  (e) => ({ ...e, pubkey: 'g' + e.pubkey.slice(1) }),
  (e) => ({ ...e, sig: flip(e.sig, Math.floor(rand() * 128)) }),
  (e) => ({ ...e, sig: e.sig.slice(0, 126) }),
  (e) => ({ ...e, sig: e.sig.toUpperCase() }),
  (e) => ({ ...e, sig: e.sig.slice(0, 127) + 'é' }),
  (e) => ({ ...e, content: e.content + ' ' }),
  (e) => ({ ...e, created_at: e.created_at === 0 ? 1 : e.created_at - 1 }),
  (e) => ({ ...e, kind: e.kind === 1 ? 2 : 1 }),
  (e) => ({ ...e, tags: [...e.tags, ['t', 'x']] }),
  (e) => ({ ...e, tags: e.tags.length ? e.tags.slice(1) : [['e']] }),
];

const isLowerHex = (s, n) => typeof s === 'string' && s.length === n && /^[0-9a-f]*$/.test(s);
const reference = (e) =>
  isLowerHex(e.id, 64) && isLowerHex(e.pubkey, 64) && isLowerHex(e.sig, 128) && nobleVerify(JSON.parse(JSON.stringify(e)));

// 400 signed events, each with one or two mutations besides itself.
const cases = [];
for (let i = 0; i < 400; i++) {
  const e = signed();
  cases.push(e);
  cases.push(pick(MUTATIONS)(e));
  if (i % 2) cases.push(pick(MUTATIONS)(pick(MUTATIONS)(e)));
}
// One character that JSON escapes (or one next to the escaped range) at
// every offset from 0 to 40 of a content, and again after 0 to 40 plain
// bytes of a tag value: the serializer looks 16 bytes at a time.
for (const special of ['"', '\\', '\n', '\u0001', '\u001f', '\u0020', '\u007f', 'é']) {
  for (let at = 0; at <= 40; at += 3) {
    const s = 'a'.repeat(at) + special + 'b'.repeat(40 - at);
    cases.push(finalizeEvent({ kind: 1, created_at: 1700000000 + at, tags: [['t', s.slice(1)]], content: s }, pick(keys)));
  }
}
// And every event object of vectors/event (valid ones and refused ones),
// but for cases about JSON text itself (nesting, duplicate keys, number
// syntax...), which belong to a JSON parser: this package takes objects.
const JSON_TEXT_KINDS = new Set([
  'duplicate_key', 'invalid_number', 'unescaped_control', 'invalid_escape',
  'trailing_data', 'syntax', 'too_deep', 'too_large', 'too_many_tags', 'invalid_utf8',
]);
for (const file of ['valid.json', 'invalid.json']) {
  for (const c of JSON.parse(readFileSync(new URL(`../../vectors/event/${file}`, import.meta.url), 'utf8'))) {
    if (JSON_TEXT_KINDS.has(c.error)) continue;
    let e;
    try {
      e = JSON.parse(c.json);
    } catch {
      continue; // a case about JSON text, which this package never sees
    }
    if (e && typeof e === 'object' && !Array.isArray(e)) cases.push(e);
  }
}
const plain = () => cases.map((e) => JSON.parse(JSON.stringify(e)));
const expected = cases.map(reference);

// Records: every case that encodes, plus random byte changes of valid ones.
const records = [];
for (const e of cases) {
  try {
    records.push(encodeEvent(JSON.parse(JSON.stringify(e))));
  } catch {
    // a mutation the record cannot hold (a shape error)
  }
}
for (let i = 0; i < 200; i++) {
  const r = pick(records).slice();
  r[Math.floor(rand() * r.length)] ^= 1 << Math.floor(rand() * 8);
  records.push(r);
}
const recordReference = (r) => {
  try {
    return reference(decodeRecord(r));
  } catch {
    return false;
  }
};
const expectedRecords = records.map(recordReference);

test('the cases hold valid and invalid events and records', () => {
  const valid = expected.filter(Boolean).length;
  assert.ok(valid >= 400 && valid < cases.length - 300, `${valid} of ${cases.length} valid`);
  const validRecords = expectedRecords.filter(Boolean).length;
  assert.ok(validRecords >= 400 && validRecords < records.length - 150, `${validRecords} of ${records.length} records valid`);
});

test('Node: the WebAssembly verifier agrees with noble on every event and record', async () => {
  assert.ok(await initVerifier());
  assert.equal(verifierName(), 'wasm');
  assert.deepEqual(await verifyEvents(plain()), expected);
  assert.deepEqual(await verifyRecords(records), expectedRecords);
});

test('Node: the WebAssembly verifier agrees with the Rust codec (nostrwire verify)', { skip: !haveBinary && 'no nostrwire binary' }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'nostrwire-js-diff-'));
  const file = join(dir, 'cases.jsonl');
  writeFileSync(file, plain().map((e) => JSON.stringify(e)).join('\n') + '\n');
  let out;
  try {
    out = execFileSync(bin, ['verify', '-j', '1', file], { maxBuffer: 1 << 26 }).toString();
  } catch (e) {
    out = e.stdout.toString();
  }
  const invalid = new Set([...out.matchAll(/^line (\d+):/gm)].map((m) => Number(m[1]) - 1));
  const rust = cases.map((_, i) => !invalid.has(i));
  assert.match(out, new RegExp(`^${rust.filter(Boolean).length} valid, ${invalid.size} invalid$`, 'm'));
  assert.deepEqual(await verifyEvents(plain()), rust);
});

const bip340 = readFileSync(new URL('../../crates/verify-wasm/tests/bip340-vectors.csv', import.meta.url), 'utf8')
  .trim()
  .split('\n')
  .slice(1)
  .map((l) => l.split(','));
const bip340Items = Buffer.concat(bip340.map((f) => Buffer.from(f[2] + f[4] + f[5], 'hex')));

test("Node: BIP-340's official vectors", async () => {
  const v = await loadVerifier();
  const got = Array.from(v.verifySignatures(new Uint8Array(bip340Items)), (x) => x === 1);
  assert.deepEqual(got, bip340.map((f) => f[6] === 'TRUE'));
  assert.equal(got.length, 15);
});

// Messages for the four-lane SHA-256 that hashes ids: every length to 300,
// lengths around 512, 1,024 and 4,096, one long message among short ones,
// then 600 random lengths, in one call (the lanes refill at every boundary).
const hashMessages = [
  ...Array.from({ length: 301 }, (_, n) => bytes(n)),
  ...[512, 1024, 4096].flatMap((b) => Array.from({ length: 19 }, (_, i) => bytes(b - 9 + i))),
  bytes(70_000),
  ...Array.from({ length: 600 }, () => bytes(Math.floor(rand() * rand() * 2000))),
];
const hashExpected = Buffer.concat(hashMessages.map((m) => createHash('sha256').update(m).digest())).toString('hex');

test('Node: the four-lane SHA-256 of the WebAssembly verifier agrees with node:crypto', async () => {
  const v = await loadVerifier();
  assert.equal(Buffer.from(v.sha256Many(hashMessages)).toString('hex'), hashExpected);
  // Small calls too: each count from 0 to 9, lengths across one block's end.
  for (let count = 0; count <= 9; count++) {
    const ms = Array.from({ length: count }, (_, i) => bytes([0, 55, 56, 63, 64, 65, 119, 120, 128][i]));
    const want = Buffer.concat(ms.map((m) => createHash('sha256').update(m).digest())).toString('hex');
    assert.equal(Buffer.from(v.sha256Many(ms)).toString('hex'), want, `${count} messages`);
  }
});

test('Node: where the engine refuses the module (no WebAssembly SIMD), noble verifies, with the same verdicts', () => {
  // A child process whose WebAssembly.compile rejects as an engine without
  // SIMD does: the package keeps the JavaScript verifier.
  const script = `
    WebAssembly.compile = async () => { throw new WebAssembly.CompileError('invalid opcode 0xfd (SIMD)'); };
    const m = await import(${JSON.stringify(new URL('../dist/index.js', import.meta.url).href)});
    const input = JSON.parse(await new Promise((r) => { let s = ''; process.stdin.setEncoding('utf8').on('data', (d) => (s += d)).on('end', () => r(s)); }));
    const loaded = await m.initVerifier();
    const events = await m.verifyEvents(input.events);
    const records = await m.verifyRecords(input.records.map((h) => Uint8Array.from(Buffer.from(h, 'hex'))));
    process.stdout.write(JSON.stringify({ loaded, verifier: m.verifierName(), events, records }));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
    input: JSON.stringify({ events: plain(), records: records.map((r) => Buffer.from(r).toString('hex')) }),
    maxBuffer: 1 << 26,
  });
  const got = JSON.parse(out);
  assert.equal(got.loaded, false);
  assert.equal(got.verifier, 'js');
  assert.deepEqual(got.events, expected);
  assert.deepEqual(got.records, expectedRecords);
});

const skipBrowser = (!haveChromium && 'no chromium (js/scripts/install-chromium.sh)') || false;
let site, strictSite, browser, page;
before(async () => {
  if (skipBrowser) return;
  const dir = mkdtempSync(join(tmpdir(), 'nostrwire-js-verify-page-'));
  await bundlePage(new URL('./browser/verify-page.js', import.meta.url).pathname, dir);
  copyFileSync(new URL('../dist/browser/verify-worker.js', import.meta.url).pathname, join(dir, 'verify-worker.js'));
  site = await serveDir(dir);
  // The same page under a policy without 'wasm-unsafe-eval'.
  const strict = `${dir}-csp`;
  cpSync(dir, strict, { recursive: true });
  const html = readFileSync(join(strict, 'index.html'), 'utf8');
  writeFileSync(join(strict, 'index.html'), html.replace('<title>', `<meta http-equiv="Content-Security-Policy" content="script-src 'self'"><title>`));
  strictSite = await serveDir(strict);
  browser = await launch();
  page = await openPage(browser, site.url);
});
after(async () => {
  await browser?.close();
  await site?.close();
  await strictSite?.close();
});

test('Chromium: the same verdicts on the main thread and in two workers, and the BIP-340 vectors', { skip: skipBrowser }, async () => {
  const hex = (b) => Buffer.from(b).toString('hex');
  const got = await page.evaluate((input) => window.verdicts(input), {
    events: plain(),
    records: records.map(hex),
    signatures: hex(bip340Items),
    hashMessages: hashMessages.map(hex),
  });
  assert.equal(got.verifier, 'wasm');
  assert.equal(got.poolFailure, null);
  assert.deepEqual(got.events, expected);
  assert.deepEqual(got.eventsFromPool, expected);
  assert.deepEqual(got.records, expectedRecords);
  assert.deepEqual(got.recordsFromPool, expectedRecords);
  assert.deepEqual(got.signatures.map((x) => x === 1), bip340.map((f) => f[6] === 'TRUE'));
  assert.equal(got.digests, hashExpected);
  assert.deepEqual(page.errors, []);
});

test('Chromium where a Content-Security-Policy forbids WebAssembly: noble verifies, with the same verdicts', { skip: skipBrowser }, async () => {
  const strictPage = await openPage(browser, strictSite.url);
  const hex = (b) => Buffer.from(b).toString('hex');
  const got = await strictPage.evaluate((input) => window.withoutWasm(input), { events: plain(), records: records.map(hex) });
  await strictPage.close();
  assert.equal(got.loaded, false);
  assert.equal(got.verifier, 'js');
  assert.deepEqual(got.events, expected);
  assert.deepEqual(got.records, expectedRecords);
});
