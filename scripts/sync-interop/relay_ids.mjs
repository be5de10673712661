// The ids of every event a relay serves, one per line (unsorted): REQs
// asking for 5,000 at a time (relays clamp it: strfry to 500), each page
// ending where the last one's oldest event was (`until`), until a page
// brings no new id. Independent of nostrwire's client code, to check what a
// sync left on a peer relay. (khatru's in-memory store answers an `until`
// query with one event too few at times: the script's data fits its first
// page.)
//   node --experimental-websocket relay_ids.mjs ws://127.0.0.1:PORT
const url = process.argv[2];
const ws = new WebSocket(url);
const seen = new Set();
let page = 0;
let until = undefined;
let fresh = 0;
let oldest = Infinity;

function ask() {
  page += 1;
  fresh = 0;
  oldest = Infinity;
  const filter = { limit: 5000 };
  if (until !== undefined) filter.until = until;
  ws.send(JSON.stringify(["REQ", `p${page}`, filter]));
}

ws.onopen = ask;
ws.onerror = (e) => {
  console.error(`relay_ids: ${url}: ${e.message ?? e}`);
  process.exit(1);
};
ws.onmessage = (m) => {
  const msg = JSON.parse(m.data);
  if (msg[0] === "EVENT" && msg[1] === `p${page}`) {
    const ev = msg[2];
    if (!seen.has(ev.id)) {
      seen.add(ev.id);
      fresh += 1;
      process.stdout.write(ev.id + "\n");
    }
    oldest = Math.min(oldest, ev.created_at);
  } else if ((msg[0] === "EOSE" || msg[0] === "CLOSED") && msg[1] === `p${page}`) {
    ws.send(JSON.stringify(["CLOSE", `p${page}`]));
    if (fresh === 0 || msg[0] === "CLOSED") {
      ws.close();
      return;
    }
    until = oldest;
    ask();
  }
};
ws.onclose = () => process.exit(0);
