// The clients of scripts/deploy-check.sh: they talk to the relay through a
// TLS reverse proxy (PUBLIC_URL, a name resolved to 127.0.0.1 here only) and
// directly (DIRECT_URL), and compare. Certificates are checked for real:
// NODE_EXTRA_CA_CERTS names the throwaway authority.
//
//   node check.mjs proxy              every check through the proxy
//   node check.mjs name NAME          NIP-11 through the proxy names NAME
//   node check.mjs publish FILE       publishes through the proxy until the
//                                     relay goes away; appends each id once
//                                     its OK true has arrived
//   node check.mjs has FILE N URL     the first N ids of FILE are stored
//                                     at URL
//   node check.mjs hold SECONDS       holds a subscription through the proxy:
//                                     prints `open`, then `closed CODE` or
//                                     `still open`
//
// Each check prints `ok - …` or `not ok - …`; the exit code is the number
// of failures (capped).
import assert from 'node:assert/strict';
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { appendFileSync, readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { generateSecretKey, getPublicKey, finalizeEvent } from 'nostr-tools/pure';
import { Relay as ToolsRelay, useWebSocketImplementation as useToolsWebSocket } from 'nostr-tools/relay';

const here = fileURLToPath(new URL('.', import.meta.url));
const js = process.env.NOSTRWIRE_JS ?? `${here}../../js/dist/index.js`;
const { Relay, useWebSocketImplementation, decodeEvent, eventFrame, jsonFrame, useZstd } = await import(js);
const { zstdDecoder, zstdDecoderWithDictionaries } = await import(js.replace(/index\.js$/, 'zstd.js'));

const PUBLIC_URL = need('PUBLIC_URL'); // wss://NAME:PORT
const DIRECT_URL = need('DIRECT_URL'); // ws://127.0.0.1:PORT
const PROXY = process.env.PROXY ?? 'proxy';
const PER_IP = Number(process.env.CONNECTIONS_PER_IP ?? 3);
const PING_SECONDS = Number(process.env.PING_SECONDS ?? 0);
const publicHost = new URL(PUBLIC_URL).hostname;

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
}

// The public name resolves to loopback for this process only.
function lookup(hostname, options, callback) {
  if (typeof options === 'function') [callback, options] = [options, {}];
  if (hostname !== publicHost) return dns.lookup(hostname, options, callback);
  if (options?.all) return callback(null, [{ address: '127.0.0.1', family: 4 }]);
  return callback(null, '127.0.0.1', 4);
}

/** A `ws` WebSocket that resolves the public name and connects from `localAddress`. */
function socketFrom(localAddress, headers = {}) {
  return class extends WebSocket {
    constructor(url, protocols, options = {}) {
      super(url, protocols, { ...options, lookup, localAddress, headers: { ...options.headers, ...headers } });
    }
  };
}
const Socket = socketFrom('127.0.0.1');
useWebSocketImplementation(Socket);
useToolsWebSocket(Socket);
// The JS package fetches nostrwire.v2 dictionary sets with the global fetch:
// the public name goes through the same lookup.
const nodeFetch = globalThis.fetch;
globalThis.fetch = async (url, init) => {
  if (new URL(String(url)).hostname !== publicHost) return nodeFetch(url, init);
  const r = await getBytes(String(url));
  const headers = Object.entries(r.headers).filter(([, v]) => typeof v === 'string');
  return new Response(r.body, { status: r.status, headers });
};

let passed = 0;
let failed = 0;
async function check(what, fn) {
  try {
    const note = await fn();
    passed++;
    console.log(`ok - ${PROXY}: ${what}${note ? ` (${note})` : ''}`);
  } catch (e) {
    failed++;
    console.log(`not ok - ${PROXY}: ${what}: ${e?.stack ?? e}`);
  }
}

const now = () => Math.floor(Date.now() / 1000);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** GET `url` with `headers`; resolves { status, headers, body }. */
function get(url, headers = {}, localAddress = '127.0.0.1') {
  const u = new URL(url.replace(/^ws/, 'http'));
  const mod = u.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = mod.get(u, { headers, lookup, localAddress, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
    });
    req.setTimeout(5000, () => req.destroy(new Error(`GET ${url}: timed out`)));
    req.on('error', reject);
  });
}

/** GET `url` as bytes; resolves { status, headers, body: Buffer }. */
function getBytes(url) {
  const u = new URL(url.replace(/^ws/, 'http'));
  const mod = u.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = mod.get(u, { lookup, agent: false }, (res) => {
      const chunks = [];
      res.on('data', (d) => chunks.push(d));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.setTimeout(5000, () => req.destroy(new Error(`GET ${url}: timed out`)));
    req.on('error', reject);
  });
}

/** Opens a raw WebSocket; rejects with the HTTP status of a refused upgrade. */
function open(url, { protocols, localAddress = '127.0.0.1', headers } = {}) {
  const Impl = socketFrom(localAddress, headers);
  const ws = new Impl(url, protocols);
  ws.received = [];
  ws.on('message', (data, binary) => ws.received.push(binary ? data : JSON.parse(data.toString())));
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('error', (e) => {
      const status = /Unexpected server response: (\d+)/.exec(e.message)?.[1];
      reject(Object.assign(e, { status: status && Number(status) }));
    });
  });
}

/** The first message received on `ws` for which `pred` holds. */
async function next(ws, pred, ms = 20000) {
  for (const deadline = Date.now() + ms; Date.now() < deadline; ) {
    const i = ws.received.findIndex(pred);
    if (i >= 0) return ws.received.splice(i, 1)[0];
    if (ws.readyState > WebSocket.OPEN) throw new Error('connection closed');
    await sleep(10);
  }
  throw new Error(`no answer within ${ms} ms (got ${JSON.stringify(ws.received).slice(0, 300)})`);
}

/** Every event a REQ returns before EOSE, through a client with nostr-tools' interface. */
function collect(relay, filters, ms = 20000) {
  return new Promise((resolve, reject) => {
    const got = [];
    const timer = setTimeout(() => reject(new Error(`no EOSE within ${ms} ms`)), ms);
    const sub = relay.subscribe(filters, {
      onevent: (e) => got.push(e),
      oneose: () => {
        clearTimeout(timer);
        sub.close();
        resolve(got);
      },
    });
  });
}

const plain = (events) => events.map(({ id, pubkey, created_at, kind, tags, content, sig }) => ({ id, pubkey, created_at, kind, tags, content, sig }));

async function proxyChecks() {
  // Started first, checked last: a quiet subscription across several pings.
  const quiet = PING_SECONDS > 0 ? quietSubscription() : null;

  await check('NIP-11 for Accept: application/nostr+json, as the relay serves it', async () => {
    const accept = { Accept: 'application/nostr+json' };
    const [viaProxy, direct] = [await get(PUBLIC_URL, accept), await get(DIRECT_URL, accept)];
    assert.equal(viaProxy.status, 200);
    assert.match(viaProxy.headers['content-type'], /^application\/nostr\+json/);
    assert.equal(viaProxy.headers['access-control-allow-origin'], '*', 'CORS header passed');
    assert.deepEqual(JSON.parse(viaProxy.body), JSON.parse(direct.body));
    return `name ${JSON.parse(viaProxy.body).name}`;
  });

  await check('the HTML page and /stats.json pass', async () => {
    const page = await get(PUBLIC_URL, { Accept: 'text/html' });
    assert.equal(page.status, 200);
    assert.match(page.headers['content-type'], /^text\/html/);
    assert.equal(page.body, (await get(DIRECT_URL, { Accept: 'text/html' })).body);
    const stats = await get(`${PUBLIC_URL}/stats.json`);
    assert.equal(stats.status, 200);
    assert.deepEqual(Object.keys(JSON.parse(stats.body)).sort(), Object.keys(JSON.parse((await get(`${DIRECT_URL}/stats.json`)).body)).sort());
  });

  await check('/metrics is refused through the proxy, served directly on loopback', async () => {
    const direct = await get(`${DIRECT_URL}/metrics`);
    assert.equal(direct.status, 200);
    assert.match(direct.body, /^nostrwire_connections_open /m);
    // The relay itself refuses a forwarded address that is not loopback.
    const forwarded = await get(`${DIRECT_URL}/metrics`, { 'X-Forwarded-For': '203.0.113.7' });
    assert.equal(forwarded.status, 404);
    // Every client here has a loopback address, which the relay would
    // serve: only the proxy stands between them and the counters.
    const seen = [];
    for (const path of ['/metrics', '/metrics?x=1', '//metrics', '/%6Detrics', '/METRICS', '/./metrics', '/x/../metrics']) {
      for (const from of ['127.0.0.2', '127.0.0.1']) {
        const r = await get(`${PUBLIC_URL}${path}`, {}, from);
        assert.doesNotMatch(r.body, /nostrwire_connections_open/, `${path} from ${from} served the metrics`);
        seen.push(`${path} ${r.status}`);
      }
    }
    return [...new Set(seen)].join(', ');
  });

  const sk = generateSecretKey();
  const pk = getPublicKey(sk);
  const published = [];
  // The JS package's transports: JSON, nostrwire.v1, and nostrwire.v2 when the relay lists it.
  const nip11 = JSON.parse((await get(DIRECT_URL, { Accept: 'application/nostr+json' })).body);
  const jsTransports = ['json', 'v1', ...(nip11.nostrwire?.transports?.includes('nostrwire.v2') ? ['v2'] : [])];
  await check(`publish over wss:// with nostr-tools (JSON), the JS package (${jsTransports.join(', ')}) and directly`, async () => {
    const clients = [['nostr-tools', await ToolsRelay.connect(PUBLIC_URL)]];
    for (const transport of jsTransports) {
      const r = await Relay.connect(PUBLIC_URL, { transport });
      assert.equal(r.transport, transport, 'Sec-WebSocket-Protocol passed both ways');
      clients.push([`js ${transport}`, r]);
    }
    clients.push(['direct', await Relay.connect(DIRECT_URL, { transport: 'auto' })]);
    const big = 'deflate me '.repeat(3000);
    for (const [i, [name, client]] of clients.entries()) {
      const event = finalizeEvent(
        { kind: 1, created_at: now() - 10 + i, tags: [['t', 'deploy-check'], ['client', name]], content: `${name} ✓ \u2028 <&> ${i % 2 ? big : ''}` },
        sk,
      );
      await client.publish(event);
      published.push(event);
    }
    for (const [, c] of clients) c.close();
    return `${published.length} events`;
  });

  await check('the same REQ through the proxy and directly gives the same events, for each client and transport', async () => {
    const filter = [{ authors: [pk], kinds: [1] }];
    const results = {};
    for (const [where, url] of [['proxy', PUBLIC_URL], ['direct', DIRECT_URL]]) {
      const tools = await ToolsRelay.connect(url);
      results[`${where} nostr-tools`] = plain(await collect(tools, filter));
      tools.close();
      for (const transport of jsTransports) {
        const r = await Relay.connect(url, { transport });
        assert.equal(r.transport, transport);
        if (transport === 'v2' && r.dictionarySet?.hash) {
          // The package fetches the relay's set from /dictionaries/<sha256>.
          for (let i = 0; i < 250 && !r.dictionarySet.held; i++) await sleep(20);
          assert.ok(r.dictionarySet.held, `${where}: the JS package did not get the dictionary set`);
        }
        results[`${where} js ${transport}`] = plain(await collect(r, filter));
        r.close();
      }
    }
    const expected = plain([...published].reverse()); // newest first
    for (const [name, events] of Object.entries(results)) assert.deepEqual(events, expected, name);
    return `${Object.keys(results).length} readers, ${expected.length} events each${jsTransports.includes('v2') ? '; the v2 readers held the dictionary set' : ''}`;
  });

  await check('permessage-deflate is negotiated with the relay through the proxy', async () => {
    const ws = await open(PUBLIC_URL);
    const ext = ws.extensions;
    ws.close();
    assert.match(ext, /permessage-deflate/);
    return ext;
  });

  await check('nostrwire.v2 through the proxy when the relay offers it: dictionary set, batches, the same events', () => v2(pk, published));

  await check('NIP-42 AUTH naming the public URL is accepted (nostr-tools) and opens a restricted kind', async () => {
    const other = getPublicKey(generateSecretKey());
    const dm = finalizeEvent({ kind: 4, created_at: now(), tags: [['p', other]], content: 'not really encrypted' }, sk);
    const r = await ToolsRelay.connect(PUBLIC_URL);
    await r.publish(dm);
    const before = await collect(r, [{ kinds: [4], authors: [pk] }]);
    assert.equal(before.length, 0, 'kind 4 served before AUTH');
    for (let i = 0; i < 100 && !r.challenge; i++) await sleep(20);
    const answer = await r.auth(async (template) => finalizeEvent(template, sk));
    const after = await collect(r, [{ kinds: [4], authors: [pk] }]);
    r.close();
    assert.deepEqual(after.map((e) => e.id), [dm.id]);
    return `relay tag ${PUBLIC_URL}, OK "${answer}"`;
  });

  await check('AUTH naming another relay, or the address the proxy connects to, is refused', async () => {
    const notes = [];
    for (const url of ['wss://relay.other.example', DIRECT_URL]) {
      const ws = await open(PUBLIC_URL);
      const [, challenge] = await next(ws, (m) => m[0] === 'AUTH');
      const auth = finalizeEvent({ kind: 22242, created_at: now(), tags: [['relay', url], ['challenge', challenge]], content: '' }, sk);
      ws.send(JSON.stringify(['AUTH', auth]));
      const ok = await next(ws, (m) => m[0] === 'OK' && m[1] === auth.id);
      ws.close();
      assert.equal(ok[2], false, `AUTH for ${url} accepted`);
      notes.push(`${url}: "${ok[3]}"`);
    }
    return notes.join('; ');
  });

  await check(`per-address connection limits count the forwarded address (connections_per_ip = ${PER_IP})`, async () => {
    const held = [];
    const refused = async (from, headers) => {
      const e = await open(PUBLIC_URL, { localAddress: from, headers }).then(
        (ws) => (held.push(ws), null),
        (e) => e,
      );
      assert.ok(e, `connection ${held.length + 1} from ${from} accepted`);
      assert.equal(e.status, 429, e.message);
    };
    try {
      for (let i = 0; i < PER_IP; i++) {
        // One of them claims another address; the proxy must not pass that on.
        const headers = i === 0 ? { 'X-Forwarded-For': '127.0.0.3', 'X-Real-IP': '127.0.0.3' } : {};
        held.push(await open(PUBLIC_URL, { localAddress: '127.0.0.2', headers }));
      }
      await refused('127.0.0.2');
      await refused('127.0.0.2', { 'X-Forwarded-For': '127.0.0.4' });
      for (let i = 0; i < PER_IP; i++) held.push(await open(PUBLIC_URL, { localAddress: '127.0.0.3' }));
      await refused('127.0.0.3');
      // A slot freed on .2 is .2's again.
      const first = held.shift();
      first.close();
      await new Promise((r) => first.once('close', r));
      for (let i = 0; ; i++) {
        try {
          held.push(await open(PUBLIC_URL, { localAddress: '127.0.0.2' }));
          break;
        } catch (e) {
          if (e.status !== 429 || i === 50) throw e;
          await sleep(20);
        }
      }
      return `127.0.0.2 and 127.0.0.3 ${PER_IP} each, the next 429; a spoofed X-Forwarded-For counted as the sender`;
    } finally {
      for (const ws of held) ws.close();
    }
  });

  if (quiet) await check(`a quiet subscription outlives ${PING_SECONDS * 3} s of relay pings through the proxy`, () => quiet);
}

/** Unsigned LEB128 at `at`; returns [value, next offset]. */
function varint(bytes, at) {
  let value = 0;
  for (let shift = 0; ; shift += 7) {
    if (at >= bytes.length || shift > 35) throw new Error('bad varint in a batch frame');
    const b = bytes[at++];
    value += (b & 0x7f) * 2 ** shift;
    if (!(b & 0x80)) return [value, at];
  }
}

/** The records of a `nostrwire.v2` batch frame (0x06) for subscription `sub`. */
function batchRecords(frame, sub) {
  const len = frame[1];
  assert.equal(frame.subarray(2, 2 + len).toString(), sub);
  let [n, at] = varint(frame, 2 + len);
  const records = [];
  while (n-- > 0) {
    const [size, start] = varint(frame, at);
    records.push(frame.subarray(start, start + size));
    at = start + size;
  }
  assert.equal(at, frame.length, 'batch frame has trailing bytes');
  return records;
}

/** Publishes one event and reads the author's events over `nostrwire.v2`
 *  at `url`, naming the dictionary set `hold` (hex) when given. */
async function v2Session(url, event, pk, hold) {
  const ws = await open(url, { protocols: ['nostrwire.v2', 'nostrwire.v1'] });
  try {
    assert.equal(ws.protocol, 'nostrwire.v2', `${url} answered ${ws.protocol || 'no subprotocol'}`);
    const announced = await next(ws, (m) => Buffer.isBuffer(m) && m[0] === 0x07);
    const relaySet = announced.subarray(1).toString('hex');
    if (hold) ws.send(Buffer.concat([Buffer.from([0x08]), Buffer.from(hold, 'hex')]));
    if (event) {
      ws.send(eventFrame(event));
      const ok = await next(ws, (m) => Buffer.isBuffer(m) && m[0] === 0x04 && m.subarray(1, 33).toString('hex') === event.id);
      assert.equal(ok[33], 1, `v2 EVENT refused: ${ok.subarray(34).toString()}`);
    }
    ws.send(jsonFrame(['REQ', 'v2', { authors: [pk] }]));
    const events = [];
    let compressed = 0;
    for (;;) {
      const m = await next(ws, (f) => Buffer.isBuffer(f) && (f[0] === 0x06 || f[0] === 0x05 || f[0] === 0x00));
      if (m[0] === 0x05) break;
      if (m[0] === 0x00) {
        const message = JSON.parse(m.subarray(1).toString());
        if (message[0] === 'AUTH') continue;
        throw new Error(`relay said ${JSON.stringify(message)}`);
      }
      for (const record of batchRecords(m, 'v2')) {
        if (record[0] === 0x81) compressed++;
        events.push(decodeEvent(new Uint8Array(record)));
      }
    }
    return { events, compressed, relaySet };
  } finally {
    ws.close();
  }
}

/** `nostrwire.v2` when the relay lists it in NIP-11: its dictionary set
 *  fetched through the proxy, an event published and the author's events
 *  read in batches through the proxy (holding the set) and directly
 *  (holding none), against nostr-tools' JSON REQ. */
async function v2(pk, published) {
  const doc = JSON.parse((await get(PUBLIC_URL, { Accept: 'application/nostr+json' })).body);
  if (!doc.nostrwire?.transports?.includes('nostrwire.v2')) return 'skipped: the relay does not offer nostrwire.v2';
  const notes = [];
  const sets = doc.nostrwire.dictionaries ?? [];
  let hold;
  useZstd(zstdDecoder);
  for (const hex of sets) {
    const r = await getBytes(`${PUBLIC_URL}/dictionaries/${hex}`);
    assert.equal(r.status, 200, `/dictionaries/${hex}`);
    assert.equal(createHash('sha256').update(r.body).digest('hex'), hex, 'the set is the one named');
    assert.match(r.headers['cache-control'] ?? '', /immutable/, 'Cache-Control passed');
    if (!hold) {
      hold = hex;
      useZstd(zstdDecoderWithDictionaries(new Uint8Array(r.body)));
      notes.push(`set ${hex.slice(0, 8)}… (${r.body.length} B) fetched through the proxy`);
    }
  }
  const sk = generateSecretKey();
  const event = finalizeEvent(
    { kind: 1, created_at: now(), tags: [['t', 'deploy-check'], ['client', 'v2']], content: `${'a longer note, so that the relay compresses its record. '.repeat(12)}✓` },
    sk,
  );
  const viaProxy = await v2Session(PUBLIC_URL, event, getPublicKey(sk), hold);
  if (hold) assert.equal(viaProxy.relaySet, hold, 'the relay announces the set NIP-11 lists first');
  const direct = await v2Session(DIRECT_URL, null, getPublicKey(sk), null);
  const tools = await ToolsRelay.connect(DIRECT_URL);
  const json = plain(await collect(tools, [{ authors: [getPublicKey(sk)] }]));
  tools.close();
  assert.deepEqual(plain(viaProxy.events), json, 'v2 through the proxy');
  assert.deepEqual(plain(direct.events), json, 'v2 directly');
  assert.deepEqual(json.map((e) => e.id), [event.id]);
  // The events of the v1 check, read again over v2.
  const older = await v2Session(PUBLIC_URL, null, pk, hold);
  assert.deepEqual(plain(older.events), plain([...published].reverse()));
  notes.push(`${viaProxy.compressed + older.compressed} of ${viaProxy.events.length + older.events.length} records compressed through the proxy, ${direct.compressed} directly without the set`);
  return notes.join('; ');
}

/** Subscribes through the proxy, stays silent for three ping intervals
 *  (`ws` answers pings itself), then expects a live event. */
async function quietSubscription() {
  const ws = await open(PUBLIC_URL, { localAddress: '127.0.0.5' });
  let pings = 0;
  ws.on('ping', () => pings++);
  const tag = `quiet-${Math.random()}`;
  ws.send(JSON.stringify(['REQ', 'quiet', { '#t': [tag], since: now() - 5 }]));
  await next(ws, (m) => m[0] === 'EOSE');
  await sleep(PING_SECONDS * 3000 + 500);
  assert.ok(pings >= 2, `${pings} pings arrived`);
  const sk = generateSecretKey();
  const event = finalizeEvent({ kind: 1, created_at: now(), tags: [['t', tag]], content: 'live' }, sk);
  const r = await Relay.connect(DIRECT_URL, { transport: 'json' });
  await r.publish(event);
  r.close();
  const [, , live] = await next(ws, (m) => m[0] === 'EVENT');
  ws.close();
  assert.equal(live.id, event.id);
  return `${pings} pings answered, then the live event arrived`;
}

/** Publishes kind-1 events through the proxy, 32 in flight, until the
 *  connection ends; each id is written to `file` once its OK true arrived. */
async function publish(file) {
  const sk = generateSecretKey();
  const ws = await open(PUBLIC_URL);
  let acked = 0;
  let inFlight = 0;
  let n = 0;
  ws.on('message', (data, binary) => {
    if (binary) return;
    const m = JSON.parse(data.toString());
    if (m[0] !== 'OK') return;
    if (m[2] !== true) throw new Error(`refused: ${m[3]}`);
    appendFileSync(file, `${m[1]}\n`);
    acked++;
    inFlight--;
    pump();
  });
  const pump = () => {
    while (inFlight < 32 && ws.readyState === WebSocket.OPEN) {
      const e = finalizeEvent({ kind: 1, created_at: now(), tags: [['t', 'backup']], content: `backup check ${n++}` }, sk);
      ws.send(JSON.stringify(['EVENT', e]));
      inFlight++;
    }
  };
  appendFileSync(file, `# ${pk(sk)}\n`);
  pump();
  await new Promise((r) => ws.once('close', r));
  console.error(`publisher: ${acked} acknowledged, ${inFlight} unanswered when the relay went away`);
}
const pk = (sk) => getPublicKey(sk);

/** The first `n` acknowledged ids of `file` are all stored at `url`. */
async function has(file, n, url) {
  const lines = readFileSync(file, 'utf8').trim().split('\n');
  const author = lines[0].slice(2);
  const acked = lines.slice(1);
  const wanted = new Set(acked.slice(0, n));
  assert.equal(wanted.size, n, `${file} holds only ${wanted.size} ids`);
  const r = await Relay.connect(url, { transport: 'binary' });
  const stored = [];
  for (let until = now() + 1; ; ) {
    const page = await collect(r, [{ authors: [author], until, limit: 1000 }], 60000);
    stored.push(...page);
    if (page.length < 1000) break;
    until = page[page.length - 1].created_at; // overlap by a second; deduplicated below
  }
  r.close();
  const ids = new Set(stored.map((e) => e.id));
  const missing = [...wanted].filter((id) => !ids.has(id));
  assert.equal(missing.length, 0, `${missing.length} of ${n} acknowledged events missing, e.g. ${missing[0]}`);
  const sent = new Set(acked);
  console.log(`${ids.size} stored; all ${n} required present; ${[...ids].filter((id) => !sent.has(id)).length} stored beyond the acknowledged list`);
}

const [mode, ...args] = process.argv.slice(2);
if (mode === 'proxy') {
  await proxyChecks();
  console.log(`${PROXY}: ${passed} passed, ${failed} failed`);
  process.exit(Math.min(failed, 100));
} else if (mode === 'name') {
  const doc = JSON.parse((await get(PUBLIC_URL, { Accept: 'application/nostr+json' })).body);
  assert.equal(doc.name, args[0]);
} else if (mode === 'publish') {
  await publish(args[0]);
} else if (mode === 'hold') {
  const ws = await open(PUBLIC_URL, { localAddress: '127.0.0.6' });
  ws.send(JSON.stringify(['REQ', 'hold', { kinds: [1], limit: 0 }]));
  await next(ws, (m) => m[0] === 'EOSE');
  console.log('open');
  const code = await Promise.race([
    new Promise((r) => ws.once('close', r)),
    sleep(Number(args[0]) * 1000).then(() => null),
  ]);
  console.log(code === null ? 'still open' : `closed ${code}`);
} else if (mode === 'has') {
  await has(args[0], Number(args[1]), args[2]);
} else {
  console.error('usage: check.mjs proxy | name NAME | publish FILE | has FILE N URL | hold SECONDS');
  process.exit(2);
}
process.exit(0);
