// Relays on loopback that follow a script, for tests of what the client
// lets through: one that answers every REQ with the same events and EOSE
// over JSON or nostrwire.v1 (as the client asks), and a nostrwire.v2 one
// that sends what the test builds (batches, JSON frames, its HTTP replies).
// The first, with `stall`, takes the connection and then answers nothing;
// with `closeAfter: n`, sends n events of a REQ and drops the connection
// (no EOSE); with `delay`, waits that many milliseconds before answering;
// with `chunk: n`, sends n events at a time, a millisecond apart (a stream
// that other relays' messages can come between).
import { createServer } from 'node:http';
import { WebSocketServer } from 'ws';
import { encodeEvent, eventFrame } from '../dist/index.js';
import { varint } from './helpers.mjs';

/**
 * Starts it; `t.after` stops it. Resolves to its ws:// URL. With `v2`, it
 * speaks nostrwire.v2 too when offered (no dictionary set; the events as
 * one batch of records).
 */
export async function scriptedRelay(t, events, opts = {}) {
  const relay = await scriptedRelayServer(events, opts);
  t.after(() => relay.stop());
  return relay.url;
}

/** As `scriptedRelay`, resolving to `{ url, stop }`. */
export async function scriptedRelayServer(events, { v2 = false, stall = false, closeAfter = Infinity, delay = 0, chunk = Infinity } = {}) {
  const server = new WebSocketServer({
    host: '127.0.0.1',
    port: 0,
    handleProtocols: (p) => (v2 && p.has('nostrwire.v2') ? 'nostrwire.v2' : p.has('nostrwire.v1') ? 'nostrwire.v1' : false),
  });
  await new Promise((r) => server.once('listening', r));
  server.on('connection', (ws) => {
    if (ws.protocol === 'nostrwire.v2') ws.send(Buffer.from([0x07]));
    ws.on('message', async (data) => {
      if (stall) return;
      if (delay) await new Promise((r) => setTimeout(r, delay));
      const binary = ws.protocol !== '';
      const [type, id] = JSON.parse(String(binary ? data.subarray(1) : data));
      if (type !== 'REQ') return;
      const sid = Buffer.from(id);
      if (ws.protocol === 'nostrwire.v2') ws.send(batchFrame(id, events.map((e) => encodeEvent(e))));
      else {
        for (const [i, e] of events.entries()) {
          if (i === closeAfter) return ws.terminate();
          if (i > 0 && i % chunk === 0) await new Promise((r) => setTimeout(r, 1));
          if (binary) ws.send(Buffer.concat([Buffer.from([0x03, sid.length]), sid, eventFrame(e).subarray(1)]));
          else ws.send(JSON.stringify(['EVENT', id, e]));
        }
      }
      ws.send(binary ? eoseFrame(id) : JSON.stringify(['EOSE', id]));
    });
  });
  return {
    url: `ws://127.0.0.1:${server.address().port}`,
    stop: () =>
      new Promise((r) => {
        for (const c of server.clients) c.terminate();
        server.close(r);
      }),
  };
}

/** A nostrwire.v2 batch frame (0x06) of stored records for subscription `subId`. */
export function batchFrame(subId, records) {
  const sid = Buffer.from(subId);
  const parts = [Buffer.from([0x06, sid.length]), sid, varint(records.length)];
  for (const r of records) parts.push(varint(r.length), Buffer.from(r));
  return Buffer.concat(parts);
}

/** `EOSE` as a binary frame (0x05). */
export const eoseFrame = (subId) => Buffer.concat([Buffer.from([0x05]), Buffer.from(subId)]);

/** A JSON `EVENT` message in a 0x00 frame, as a relay may send it on a binary connection. */
export const jsonEventFrame = (subId, event) => Buffer.concat([Buffer.from([0x00]), Buffer.from(JSON.stringify(['EVENT', subId, event]))]);

/**
 * A nostrwire.v2 relay on loopback: names dictionary set `set` (hex, or
 * none) when a client connects, and answers each REQ with what
 * `onReq(ws, subId)` sends. Its HTTP requests (`GET /dictionaries/<hex>`)
 * go to `http(req, res)`, else 404. `t.after` stops it; resolves to
 * `{ url, http }`.
 */
export async function scriptedRelayV2(t, { set = null, onReq, http } = {}) {
  const sockets = new Set();
  const server = createServer((req, res) => (http ? http(req, res) : res.writeHead(404).end()));
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  const wss = new WebSocketServer({ server, handleProtocols: (p) => (p.has('nostrwire.v2') ? 'nostrwire.v2' : false) });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  wss.on('connection', (ws) => {
    ws.send(set ? Buffer.concat([Buffer.from([0x07]), Buffer.from(set, 'hex')]) : Buffer.from([0x07]));
    ws.on('message', (data) => {
      if (data[0] !== 0x00) return;
      const [type, id] = JSON.parse(String(data.subarray(1)));
      if (type === 'REQ') onReq?.(ws, id);
    });
  });
  t.after(() => {
    wss.close();
    // Replies the script left unfinished would keep the server open.
    for (const s of sockets) s.destroy();
    return new Promise((r) => server.close(r));
  });
  const { port } = server.address();
  return { url: `ws://127.0.0.1:${port}`, http: `http://127.0.0.1:${port}` };
}
