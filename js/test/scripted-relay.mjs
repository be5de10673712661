// A relay on loopback that answers every REQ with the same events and EOSE,
// over JSON or nostrwire.v1 (as the client asks): a relay that sends what a
// subscription did not ask for, for tests of what the client lets through.
// `stall`: it takes the connection and then answers nothing; `closeAfter:
// n`: it sends n events of a REQ and drops the connection (no EOSE);
// `delay`: milliseconds it waits before answering a REQ.
import { WebSocketServer } from 'ws';
import { eventFrame } from '../dist/index.js';

/**
 * Starts it; `t.after` stops it (or pass `null` and call the `stop` of
 * `scriptedRelayServer`). Resolves to its ws:// URL.
 */
export async function scriptedRelay(t, events, opts = {}) {
  const relay = await scriptedRelayServer(events, opts);
  t.after(() => relay.stop());
  return relay.url;
}

/** As `scriptedRelay`, resolving to `{ url, stop }`. */
export async function scriptedRelayServer(events, { stall = false, closeAfter = Infinity, delay = 0 } = {}) {
  const server = new WebSocketServer({
    host: '127.0.0.1',
    port: 0,
    handleProtocols: (p) => (p.has('nostrwire.v1') ? 'nostrwire.v1' : false),
  });
  await new Promise((r) => server.once('listening', r));
  server.on('connection', (ws) => ws.on('message', async (data) => {
    if (stall) return;
    if (delay) await new Promise((r) => setTimeout(r, delay));
    const binary = ws.protocol === 'nostrwire.v1';
    const [type, id] = JSON.parse(String(binary ? data.subarray(1) : data));
    if (type !== 'REQ') return;
    const sid = Buffer.from(id);
    for (const [i, e] of events.entries()) {
      if (i === closeAfter) return ws.terminate();
      if (binary) ws.send(Buffer.concat([Buffer.from([0x03, sid.length]), sid, eventFrame(e).subarray(1)]));
      else ws.send(JSON.stringify(['EVENT', id, e]));
    }
    ws.send(binary ? Buffer.concat([Buffer.from([0x05]), sid]) : JSON.stringify(['EOSE', id]));
  }));
  return {
    url: `ws://127.0.0.1:${server.address().port}`,
    stop: () =>
      new Promise((r) => {
        for (const c of server.clients) c.terminate();
        server.close(r);
      }),
  };
}
