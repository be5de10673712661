// How the client decodes records: the fast decoder against the reference
// one (the same events, the same first error), and nostrwire.v2 batches
// decompressed into one buffer per batch (verified), a scratch buffer (not
// verified), or one array per record (a batch claiming too much), from a
// scripted relay on loopback.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import WebSocket from 'ws';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import { Relay, useWebSocketImplementation, decodeRecord, encodeEvent, initVerifier, verifiedSymbol, NwbError, DEFAULT_LIMITS } from '../dist/index.js';
import { varint } from './helpers.mjs';
import { scriptedRelayV2, batchFrame, eoseFrame } from './scripted-relay.mjs';

useWebSocketImplementation(WebSocket);
const repo = resolve(new URL('../..', import.meta.url).pathname);
const unhex = (h) => Uint8Array.from(Buffer.from(h, 'hex'));
const kindOf = (f) => {
  try {
    f();
  } catch (e) {
    return e instanceof NwbError ? e.kind : `not an NwbError: ${e}`;
  }
  return 'no error';
};

const sk = generateSecretKey();
const signed = (tags, content) => finalizeEvent({ kind: 1, created_at: 1_700_000_000, tags, content }, sk);
const HEX64 = 'ab'.repeat(32);
const PREFIX_LEN = 139;

test('records decode to their events whatever their tags and content hold', () => {
  const events = [
    signed([], ''),
    signed([['e', HEX64], ['p', HEX64, 'wss://relay.example.com', 'mention']], 'hello'),
    // Hex of other lengths, odd-length and upper-case hex (text), empty and long text.
    signed([['x', 'abcd', 'abc', 'ABCD', '', 'a'.repeat(40), 'wss://' + 'r'.repeat(300)]], 'x'.repeat(500)),
    // Text that is not ASCII: the fast decoder hands these to the reference one.
    signed([['t', 'nostr'], ['subject', 'Grüße 🌍'], ['emoji', 'wave', 'https://example.com/w.png']], 'ascii'),
    signed([['t', 'café']], 'content ünïcödé 🎉 and more'),
    // Long-form names (more than one character) and a name that is not ASCII.
    signed([['relay', 'wss://a'], ['é', 'v'], ['imeta', 'url https://x', 'm image/png']], '\u{1F600}'),
  ];
  for (const e of events) {
    const back = decodeRecord(encodeEvent(e));
    assert.deepEqual(back, { id: e.id, pubkey: e.pubkey, created_at: e.created_at, kind: e.kind, tags: e.tags, content: e.content, sig: e.sig });
  }
});

test('a record with several faults reports the first in record order', () => {
  const e = signed([['t', 'zz'], ['x', 'y']], 'content');
  const record = encodeEvent(e);
  // ['t', 'zz'] is `05 74 04 7a 7a` (short name, 2 bytes of text); the text
  // becomes invalid UTF-8.
  const at = Buffer.from(record).indexOf(Buffer.from([0x05, 0x74, 0x04, 0x7a, 0x7a]), PREFIX_LEN);
  assert.ok(at > 0);
  const broken = Uint8Array.from(record);
  broken[at + 3] = 0xff;
  broken[at + 4] = 0xfe;
  assert.equal(kindOf(() => decodeRecord(broken)), 'invalid_utf8');
  // The same, with a byte after the content as well: still invalid_utf8 first.
  assert.equal(kindOf(() => decodeRecord(Uint8Array.from([...broken, 0x41]))), 'invalid_utf8');
  assert.equal(kindOf(() => decodeRecord(Uint8Array.from([...record, 0x41]))), 'trailing_bytes');
  // A text element that is all hex digits, of even length, had the hex form:
  // ['t', 'abcd'] is `05 74 05 ab cd` (hex of 2 bytes); as text it would be
  // `05 74 08 61 62 63 64`, and the tag block two bytes longer.
  const hexForm = encodeEvent(signed([['t', 'abcd']], ''));
  const pos = Buffer.from(hexForm).indexOf(Buffer.from([0x05, 0x74, 0x05, 0xab, 0xcd]), PREFIX_LEN);
  assert.ok(pos > 0);
  const asText = Uint8Array.from([...hexForm.subarray(0, pos), 0x05, 0x74, 0x08, 0x61, 0x62, 0x63, 0x64, ...hexForm.subarray(pos + 5)]);
  asText[PREFIX_LEN] += 2;
  assert.equal(kindOf(() => decodeRecord(asText)), 'non_canonical_hex');
  // A long-form name of one ASCII character had the short form.
  const named = encodeEvent(signed([['tt', 'v']], ''));
  const n = Buffer.from(named).indexOf(Buffer.from([0x04, 0x04, 0x74, 0x74]), PREFIX_LEN);
  assert.ok(n > 0);
  const longT = Uint8Array.from([...named.subarray(0, n), 0x04, 0x02, 0x74, ...named.subarray(n + 4)]);
  longT[PREFIX_LEN] -= 1;
  assert.equal(kindOf(() => decodeRecord(longT)), 'non_canonical_name');
});

// A nostrwire.v2 relay that names no set and answers each REQ with one batch
// of `entries` (stored records) and EOSE.
async function batchRelay(t, entries) {
  const relay = await scriptedRelayV2(t, {
    onReq: (ws, id) => {
      ws.send(batchFrame(id, entries));
      ws.send(eoseFrame(id));
    },
  });
  return relay.url;
}

async function receive(url, opts) {
  const r = await Relay.connect(url, { transport: 'v2', ...opts });
  const notices = [];
  r.onnotice = (m) => notices.push(m);
  const events = await new Promise((resolve) => {
    const got = [];
    r.subscribe([{}], { onevent: (e) => got.push(e), oneose: () => resolve(got) });
  });
  r.close();
  return { events, notices };
}

const compressed = JSON.parse(readFileSync(resolve(repo, 'vectors/wire/compressed.json'), 'utf8')).cases;
const zstdRecord = unhex(compressed.find((c) => c.record).hex);
const checksummed = unhex(compressed.find((c) => c.error === 'decompress').hex);
const zstdEvent = decodeRecord(unhex(compressed.find((c) => c.record).record));

// A batch is decoded by the WebAssembly module once it is loaded and the
// limits are the defaults; other limits keep the JavaScript decoder.
const MODES = {
  'verified, WebAssembly decoder (records verified as it hands them back)': {},
  'verified, JavaScript decoder (other limits; one buffer per batch)': { limits: { ...DEFAULT_LIMITS, maxTags: 19_999 } },
  'not verified, WebAssembly decoder': { verifyEvent: false },
  'not verified, JavaScript decoder (other limits)': { verifyEvent: false, limits: { ...DEFAULT_LIMITS, maxTags: 19_999 } },
};
for (const [mode, opts] of Object.entries(MODES)) {
  test(`v2 batch, ${mode}: every record decoded in order, a bad one reported`, async (t) => {
    await initVerifier();
    const raw = signed([['t', 'raw']], 'sent uncompressed');
    const url = await batchRelay(t, [zstdRecord, encodeEvent(raw), checksummed, zstdRecord]);
    // The module's output reaches the client through JSON.parse.
    const parse = JSON.parse;
    let rendered = 0;
    JSON.parse = (text, ...rest) => {
      // Only this test's batches count.
      if (typeof text === 'string' && /^\[(null|\{"id":")/.test(text) && text.includes(raw.id)) rendered++;
      return parse(text, ...rest);
    };
    let got;
    try {
      got = await receive(url, opts);
    } finally {
      JSON.parse = parse;
    }
    const { events, notices } = got;
    assert.equal(rendered > 0, mode.includes('WebAssembly decoder'), `batches rendered by the module: ${rendered}`);
    assert.deepEqual(events.map((e) => e.id), [zstdEvent.id, raw.id, zstdEvent.id]);
    assert.deepEqual(events[0], events[2]);
    assert.equal(events[0].content, zstdEvent.content);
    assert.deepEqual(notices, ['invalid: decompress']);
    // Verified from the records as decompressed: the buffer's slices are intact.
    if (opts.verifyEvent !== false) assert.ok(events.every((e) => e[verifiedSymbol] === true));
  });
}

test('v2 batch whose records claim more than a batch buffer: each decompressed on its own, the liars refused', async (t) => {
  // Five records that each claim 1 MiB (the limit) from a few bytes.
  const liar = Uint8Array.from([0x81, 0x00, ...varint(1 << 20), 0x20, 0x00, 0x01, 0x00, 0x00]);
  const url = await batchRelay(t, [zstdRecord, liar, liar, liar, liar, liar, zstdRecord]);
  const { events, notices } = await receive(url, {});
  assert.deepEqual(events.map((e) => e.id), [zstdEvent.id, zstdEvent.id]);
  assert.ok(events.every((e) => e[verifiedSymbol] === true));
  assert.deepEqual(notices, Array(5).fill('invalid: decompress'));
});

test('a batch is decoded in slices: other tasks run between them, and what follows keeps its order', async (t) => {
  const e = signed([['e', HEX64], ['t', 'nostr']], 'sliced');
  // 300 records, then one that fails to decompress: its notice marks the
  // end of the batch's decoding.
  const url = await batchRelay(t, [...Array(300).fill(encodeEvent(e)), checksummed]);
  const r = await Relay.connect(url, { transport: 'v2', verifyEvent: false });
  t.after(() => r.close());
  // A clock that moves 1 ms per reading, so slices end after a few records
  // whatever this machine's speed.
  const now = performance.now;
  let clock = 0;
  performance.now = () => (clock += 1);
  t.after(() => {
    performance.now = now;
  });
  const marks = [];
  r.onnotice = (m) => marks.push(m);
  let n = 0;
  let eoseAfter = -1;
  await new Promise((resolve) => {
    r.subscribe([{}], {
      onevent: () => {
        // A task queued by the first event runs before the batch is decoded.
        if (n++ === 0) setImmediate(() => marks.push('another task'));
      },
      oneose: () => {
        eoseAfter = n;
        resolve();
      },
    });
  });
  performance.now = now;
  assert.equal(eoseAfter, 300);
  assert.deepEqual(marks, ['another task', 'invalid: decompress']);
});

test('a throwing alreadyHaveEvent loses only its own event: the batch goes on, and the error is reported', { timeout: 10_000 }, async (t) => {
  const events = [0, 1, 2].map((i) => signed([], `n${i}`));
  const url = await batchRelay(t, events.map((e) => encodeEvent(e)));
  const r = await Relay.connect(url, { transport: 'v2', verifyEvent: false });
  t.after(() => r.close());
  // The error surfaces as an uncaught one, as an event handler's would.
  const runner = process.listeners('uncaughtException');
  process.removeAllListeners('uncaughtException');
  const reported = [];
  process.on('uncaughtException', (e) => reported.push(e.message));
  t.after(() => {
    process.removeAllListeners('uncaughtException');
    for (const l of runner) process.on('uncaughtException', l);
  });
  const got = await new Promise((resolve) => {
    const seen = [];
    r.subscribe([{}], {
      alreadyHaveEvent: (id) => {
        if (id === events[1].id) throw new Error('callback failed');
        return false;
      },
      onevent: (e) => seen.push(e.id),
      oneose: () => resolve(seen),
    });
  });
  await new Promise((res) => setTimeout(res, 20));
  assert.deepEqual(got, [events[0].id, events[2].id]);
  assert.deepEqual(reported, ['callback failed']);
});
