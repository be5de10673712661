#!/usr/bin/env node
// The interop matrix's JavaScript client: the js/ package's Relay in Node.
//   node node.mjs --relay ws://127.0.0.1:PORT --transport json|v2 --case CASE.json
// Prints one JSON object (tests/interop/README.md); diagnostics on stderr.
// Exits 2 when --transport v2 was asked and the relay did not negotiate it.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';

const pkg = new URL('../../../../js/', import.meta.url);
const { Relay, NwbError, decodeRecord, matchFilter, useWebSocketImplementation } = await import(
  new URL('dist/index.js', pkg).href
);
// Node 20 has no global WebSocket; the package's tests use `ws` too.
useWebSocketImplementation(createRequire(new URL('package.json', pkg))('ws'));

const { values: args } = parseArgs({
  options: { relay: { type: 'string' }, transport: { type: 'string' }, case: { type: 'string' } },
});
if (!args.relay || !['json', 'v2'].includes(args.transport) || !args.case) {
  console.error('usage: node.mjs --relay URL --transport json|v2 --case CASE.json');
  process.exit(64);
}
const kase = JSON.parse(readFileSync(args.case, 'utf8'));

// The machine-readable prefix of an OK message (NIP-01): `duplicate`, `invalid`, ….
const prefix = (message) => /^([a-z-]+):/.exec(message ?? '')?.[1] ?? '';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const t0 = Date.now();
const phase = (name) => console.error(`${name} done at ${Date.now() - t0} ms`);

async function connect() {
  let relay;
  try {
    relay = await Relay.connect(args.relay, { transport: args.transport });
  } catch (e) {
    // A relay that answers without the subprotocol fails the handshake
    // when v2 is insisted on: exit 2 if it speaks JSON.
    if (args.transport !== 'v2') throw e;
    (await Relay.connect(args.relay, { transport: 'json' })).close();
    console.error(`the relay did not negotiate nostrwire.v2: ${e.message}`);
    process.exit(2);
  }
  if (args.transport === 'v2' && relay.transport !== 'v2') {
    console.error(`the relay negotiated ${relay.transport}, not nostrwire.v2`);
    process.exit(2);
  }
  return relay;
}

async function publish(relay, event) {
  try {
    const message = await relay.publish(event);
    return { id: event.id, accepted: true, prefix: prefix(message) };
  } catch (e) {
    if (/timed out|connection closed/.test(e.message)) throw e;
    return { id: event.id, accepted: false, prefix: prefix(e.message) };
  }
}

// A subscription that records every event the client hands on: verified
// ones that match (onevent) and verified ones that do not (so that a relay
// sending the wrong events is seen); events that fail verification never count.
function subscribe(relay, filter, got) {
  let eose;
  const reached = new Promise((resolve) => (eose = resolve));
  const sub = relay.subscribe([filter], {
    onevent: (e) => got.push(e.id),
    oninvalidevent: (e, reason) => {
      if (reason === 'unmatched') got.push(e.id);
      else console.error(`dropped ${e.id}: ${reason}`);
    },
    oneose: () => eose(),
    onclose: (reason) => reason !== 'closed by caller' && console.error(`subscription closed: ${reason}`),
  });
  return { sub, reached };
}

const relay = await connect();
const negotiated = relay.transport === 'v2' ? 'nostrwire.v2' : relay.transport;
if (relay.transport === 'v2' && relay.dictionarySet?.hash) {
  // Hold the relay's set before querying, so stored records arrive compressed.
  for (let i = 0; i < 100 && !relay.dictionarySet.held; i++) await sleep(50);
  console.error(`dictionary set ${relay.dictionarySet.hash.slice(0, 12)}… held: ${relay.dictionarySet.held}`);
}

const ok = [];
for (const event of [...kase.publish, ...kase.invalid]) ok.push(await publish(relay, event));
phase('publish');

const queries = {};
for (const q of kase.queries) {
  const got = [];
  const { sub, reached } = subscribe(relay, q.filter, got);
  await reached;
  sub.close();
  queries[q.name] = got.sort();
  if (process.env.MATRIX_DEBUG) phase(q.name);
}
phase('queries');

const live = [];
const { sub, reached } = subscribe(relay, kase.live.filter, live);
await reached;
const stored = live.splice(0);
if (stored.length) console.error(`live filter matched ${stored.length} stored events`);
const publisher = await connect();
for (const event of kase.live.events) {
  const verdict = await publish(publisher, event);
  if (!verdict.accepted) console.error(`live event ${event.id} refused: ${verdict.prefix}`);
}
const wanted = kase.live.events.filter((e) => matchFilter(kase.live.filter, e)).map((e) => e.id);
const deadline = Date.now() + (kase.live.wait_ms ?? 5000);
while (Date.now() < deadline && !wanted.every((id) => live.includes(id))) await sleep(20);
phase('live');
sub.close();
publisher.close();
relay.close();

const refused = kase.hostile_records.map(({ name, hex }) => {
  try {
    decodeRecord(Buffer.from(hex, 'hex'));
    return { case: name, refused: false, kind: '' };
  } catch (e) {
    if (!(e instanceof NwbError)) throw e;
    return { case: name, refused: true, kind: e.kind };
  }
});

process.stdout.write(
  JSON.stringify({ client: 'node', negotiated, ok, queries, live: live.sort(), refused }) + '\n',
);
process.exit(0);
