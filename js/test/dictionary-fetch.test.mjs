// nostrwire.v2 dictionary sets fetched beside a hostile relay: one that
// names an honest relay's set and never finishes serving it must not hold
// up the honest relay's `connect` or its compressed records; a fetch ends
// at its time limit and at its size limit. Its own process: the page's
// memory of checked sets starts empty.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import WebSocket from 'ws';
import { Relay as ToolsRelay, useWebSocketImplementation as useToolsWebSocket } from 'nostr-tools/relay';
import { Relay, useWebSocketImplementation, verifiedSymbol } from '../dist/index.js';
import { startRelay, haveBinary, bin } from './relay-process.mjs';
import { scriptedRelayV2 } from './scripted-relay.mjs';

useWebSocketImplementation(WebSocket);
useToolsWebSocket(WebSocket);
const skip = !haveBinary && 'no nostrwire binary (set NOSTRWIRE_BIN)';
const repo = resolve(new URL('../..', import.meta.url).pathname);
const corpus = readFileSync(join(repo, 'testdata/real-events.jsonl'), 'utf8')
  .trim()
  .split('\n')
  .map((l) => JSON.parse(l))
  .filter((e) => [1, 6, 7].includes(e.kind))
  .slice(0, 60);

let honest, set, setHash;
before(async () => {
  if (skip) return;
  const dir = mkdtempSync(join(tmpdir(), 'nostrwire-js-sets-'));
  const file = join(dir, 'set.nwbd');
  execFileSync(bin, ['dict', 'train', '--per-kind', '--corpus', join(repo, 'testdata/real-events.jsonl'), '-o', file], { stdio: 'ignore' });
  set = readFileSync(file);
  setHash = createHash('sha256').update(set).digest('hex');
  honest = await startRelay({ config: `[storage]\ndictionaries = "${file}"\n[auth]\nchallenge_on_connect = false\n` });
  const tools = await ToolsRelay.connect(honest.url);
  for (const e of corpus) await tools.publish(e);
  tools.close();
});
after(() => honest?.stop());

async function connectNoting(url, opts) {
  const r = new Relay(url, { transport: 'v2', ...opts });
  r.notices = [];
  r.onnotice = (m) => r.notices.push(m);
  await r.connect();
  return r;
}

async function until(check, what) {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((res) => setTimeout(res, 20));
  assert.ok(check(), what);
}

function collect(r) {
  return new Promise((resolve) => {
    const got = [];
    const sub = r.subscribe([{ kinds: [1, 6, 7] }], {
      onevent: (e) => got.push(e),
      oneose: () => {
        sub.close();
        resolve(got);
      },
    });
  });
}

test("a relay that names another relay's set and never finishes serving it stalls neither that relay's connect nor its set", { skip }, async (t) => {
  // The hostile relay sends the start of the real set, then nothing, until
  // the test lets it end its reply.
  let asked;
  const requested = new Promise((res) => (asked = res));
  let endReply;
  const replyEnded = new Promise((res) => (endReply = res));
  const hostile = await scriptedRelayV2(t, {
    set: setHash,
    http: (req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(set.length) });
      res.write(set.subarray(0, 1000));
      asked();
      replyEnded.then(() => res.destroy());
    },
  });
  t.after(() => endReply());
  const bad = await connectNoting(hostile.url);
  await requested;
  assert.equal(bad.dictionarySet.held, false);

  // Without the hostile reply ending, the honest relay connects, fetches its
  // set from itself, holds it, and its records come compressed.
  let order = [];
  const deadline = setTimeout(() => {
    order.push('hostile reply ended');
    endReply();
  }, 15_000);
  const good = await connectNoting(honest.url, { connectionTimeout: 60_000 });
  order.push('connected');
  clearTimeout(deadline);
  assert.deepEqual(order, ['connected']);
  await until(() => good.dictionarySet.held, 'the honest relay\'s set held');
  assert.equal(good.dictionarySet.hash, setHash);
  assert.equal(bad.dictionarySet.held, false, 'the hostile fetch is still its own');
  const got = await collect(good);
  assert.deepEqual(got.map((e) => e.id).sort(), corpus.map((e) => e.id).sort());
  assert.ok(got.every((e) => e[verifiedSymbol] === true));
  assert.deepEqual(good.notices, []);

  // Once checked, the set is this page's, whichever relay names it next.
  const again = await connectNoting(hostile.url);
  assert.equal(again.dictionarySet.held, true);
  for (const r of [bad, good, again]) r.close();
});

test('a dictionary set fetch ends at its time limit: records stay uncompressed and a notice says why', async (t) => {
  const hostile = await scriptedRelayV2(t, {
    set: createHash('sha256').update('never sent').digest('hex'),
    http: (req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.write(Buffer.from('NWBD'));
    },
  });
  const r = await connectNoting(hostile.url, { dictionarySetTimeout: 300 });
  await until(() => r.notices.length > 0, 'a notice');
  assert.match(r.notices[0], /unavailable \(dictionary set [0-9a-f]{64}: not fetched within 300 ms\); records arrive uncompressed/);
  assert.equal(r.dictionarySet.held, false);
  r.close();
});

test('a dictionary set fetch ends at its size limit, declared or sent', async (t) => {
  const max = 64 << 10;
  let sent = 0;
  for (const declared of [true, false]) {
    const hostile = await scriptedRelayV2(t, {
      set: createHash('sha256').update(`endless ${declared}`).digest('hex'),
      http: (req, res) => {
        res.writeHead(200, declared ? { 'content-length': String(max + 1) } : {});
        // Without end, unless the client stops reading.
        const chunk = Buffer.alloc(16 << 10, 7);
        const more = () => {
          while (!res.destroyed && sent < (64 << 20)) {
            sent += chunk.length;
            if (!res.write(chunk)) return res.once('drain', more);
          }
        };
        res.on('close', () => res.destroy());
        more();
      },
    });
    sent = 0;
    const r = await connectNoting(hostile.url, { maxDictionarySetBytes: max, dictionarySetTimeout: 20_000 });
    await until(() => r.notices.length > 0, 'a notice');
    assert.match(r.notices[0], new RegExp(`larger than ${max} bytes`), declared ? 'declared' : 'sent');
    assert.equal(r.dictionarySet.held, false);
    r.close();
  }
});
