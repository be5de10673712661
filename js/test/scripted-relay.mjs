// A relay on loopback that answers every REQ with the same events and EOSE,
// over JSON or nostrwire.v1 (as the client asks): a relay that sends what a
// subscription did not ask for, for tests of what the client lets through.
import { WebSocketServer } from 'ws';
import { eventFrame } from '../dist/index.js';

/** Starts it; `t.after` stops it. Resolves to its ws:// URL. */
export async function scriptedRelay(t, events) {
  const server = new WebSocketServer({
    host: '127.0.0.1',
    port: 0,
    handleProtocols: (p) => (p.has('nostrwire.v1') ? 'nostrwire.v1' : false),
  });
  await new Promise((r) => server.once('listening', r));
  server.on('connection', (ws) => ws.on('message', (data) => {
    const binary = ws.protocol === 'nostrwire.v1';
    const [type, id] = JSON.parse(String(binary ? data.subarray(1) : data));
    if (type !== 'REQ') return;
    const sid = Buffer.from(id);
    for (const e of events) {
      if (binary) ws.send(Buffer.concat([Buffer.from([0x03, sid.length]), sid, eventFrame(e).subarray(1)]));
      else ws.send(JSON.stringify(['EVENT', id, e]));
    }
    ws.send(binary ? Buffer.concat([Buffer.from([0x05]), sid]) : JSON.stringify(['EOSE', id]));
  }));
  t.after(() => server.close());
  return `ws://127.0.0.1:${server.address().port}`;
}
