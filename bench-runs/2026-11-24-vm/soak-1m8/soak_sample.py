# soak_sample.py PID URL SECONDS OUT: every 15 s: relay memory, /metrics, three REQ latencies
import asyncio, json, sys, time, urllib.request, websockets
pid, url, secs, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
http = url.replace('ws://', 'http://') + '/metrics'
def status():
    d = {}
    for l in open(f'/proc/{pid}/status'):
        k, _, v = l.partition(':')
        if k in ('VmRSS', 'RssAnon', 'RssFile'): d[k] = int(v.split()[0]) // 1024
    return d
def metrics():
    want = ('nostrwire_events_stored_total', 'nostrwire_db_events', 'nostrwire_db_bytes',
            'nostrwire_db_index_backlog_events', 'nostrwire_db_search_backlog_events', 'nostrwire_connections_open')
    d = {}
    for l in urllib.request.urlopen(http, timeout=5).read().decode().splitlines():
        n, _, v = l.partition(' ')
        if n in want: d[n.replace('nostrwire_', '')] = float(v)
    return d
async def req(ws, sub, flt):
    t = time.perf_counter(); n = 0
    await ws.send(json.dumps(['REQ', sub, flt]))
    while True:
        m = json.loads(await ws.recv())
        if m[0] == 'EVENT' and m[1] == sub: n += 1
        elif m[0] in ('EOSE', 'CLOSED') and m[1] == sub: break
    await ws.send(json.dumps(['CLOSE', sub]))
    return (time.perf_counter() - t) * 1000, n
async def main():
    start = time.time()
    with open(out, 'w') as f:
        f.write('t_s\trss_mib\tanon_mib\tfile_mib\tstored\tdb_events\tdb_mib\tindex_backlog\tsearch_backlog\tconns\tq_kind1_ms\tq_author_ms\tq_search_ms\n')
        async with websockets.connect(url, max_size=1 << 24) as ws:
            author = None
            while time.time() - start < secs:
                s = status(); m = metrics()
                k1, _ = await req(ws, 'k', {'kinds': [1], 'limit': 100})
                if author is None:
                    await ws.send(json.dumps(['REQ', 'a0', {'kinds': [1], 'limit': 1}]))
                    while True:
                        msg = json.loads(await ws.recv())
                        if msg[0] == 'EVENT' and msg[1] == 'a0': author = msg[2]['pubkey']
                        if msg[0] == 'EOSE' and msg[1] == 'a0': break
                    await ws.send(json.dumps(['CLOSE', 'a0']))
                au, _ = await req(ws, 'a', {'authors': [author] if author else ['00'*32], 'limit': 50})
                se, _ = await req(ws, 's', {'search': 'nostr bitcoin', 'limit': 20})
                f.write('%d\t%d\t%d\t%d\t%d\t%d\t%.0f\t%d\t%d\t%d\t%.2f\t%.2f\t%.2f\n' % (
                    time.time() - start, s['VmRSS'], s['RssAnon'], s['RssFile'], m.get('events_stored_total', 0),
                    m.get('db_events', 0), m.get('db_bytes', 0) / 2**20, m.get('db_index_backlog_events', 0),
                    m.get('db_search_backlog_events', 0), m.get('connections_open', 0), k1, au, se))
                f.flush()
                await asyncio.sleep(15)
asyncio.run(main())
