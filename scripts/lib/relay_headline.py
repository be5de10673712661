#!/usr/bin/env python3
"""headline.md of a scripts/compare-relays.sh run, from the run's relays.json,
nostr-bench.jsonl and names.tsv (each load-tester URL and its relay's name).

Usage: scripts/lib/relay_headline.py RUN RUN/names.tsv PER_TAG CONNECTIONS \
           BENCH_SECONDS BENCH_THREADS REQ_LIMIT > RUN/headline.md
"""
import json, os, statistics, sys
from collections import defaultdict

out, names_path, per_tag, conns, secs, threads, limit = sys.argv[1:]
OURS = "nostrwire"
GATE = 0.001  # a ratio needs every relay under 0.1 % timeouts (failures)
BYTES_TOL = 0.01

names = {}
if os.path.exists(names_path):
    for line in open(names_path):
        url, name = line.rstrip("\n").split("\t")
        names[url] = name

load = None
if os.path.exists(os.path.join(out, "relays.json")):
    load = json.load(open(os.path.join(out, "relays.json")))
nb = []
nb_path = os.path.join(out, "nostr-bench.jsonl")
if os.path.exists(nb_path):
    nb = [json.loads(l) for l in open(nb_path) if l.strip()]

relays = []
def see(r):
    if r not in relays:
        relays.append(r)
see(OURS)
if load:
    for x in load["totals"]:
        see(names.get(x["relay"], x["relay"]))
for x in nb:
    see(x["relay"])
if not any(x["relay"] == OURS for x in nb) and not (load and OURS in names.values()):
    relays.remove(OURS)
peers = [r for r in relays if r != OURS]

def fmt(v, digits=0):
    if v is None:
        return "–"
    if digits == 0:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"

def pct(x):
    return f"{x * 100:.2f} %" if x < 0.1 else f"{x * 100:.1f} %"

rows = []  # (figure, tool, {relay: text}, ratio text)

def ratio_text(kind, clean_vals, gate_notes, bytes_note, n_clean, n_all, left_out=None):
    """kind: 'higher' (throughput) or 'lower' (CPU per op)."""
    if bytes_note:
        return f"— ({bytes_note})"
    if left_out:
        gate_notes = gate_notes + [left_out]
    ours = clean_vals.get(OURS)
    cands = {r: v for r, v in clean_vals.items() if r != OURS and v is not None and v > 0}
    if n_clean == 0 or ours is None or not cands:
        why = "; ".join(gate_notes) if gate_notes else "no peer figure"
        if ours is None and not gate_notes:
            why = "no figure of ours"
        return f"— ({why})"
    best = max(cands, key=cands.get) if kind == "higher" else min(cands, key=cands.get)
    text = f"{ours / cands[best]:.2f} vs {best}"
    if n_clean < n_all:
        text += f" (from {n_clean} of {n_all} rounds; {'; '.join(gate_notes)})"
    elif left_out:
        text += f" ({left_out})"
    return text

# ---- nostr-bench ------------------------------------------------------------
by_test = defaultdict(list)
for x in nb:
    by_test[x["test"]].append(x)
for test in sorted(by_test, key=lambda t: (t.split("-c")[0] != "event", int(t.split("-c")[1]))):
    recs = by_test[test]
    tool = recs[0]["tool"]
    c = recs[0]["connections"]
    rounds = sorted({x["round"] for x in recs})
    # A relay that greets with AUTH is misread by nostr-bench's event loop.
    misread = {x["relay"] for x in recs if tool == "event" and x.get("greeting") == "AUTH"}
    def failed_share(x):
        if "error" in x or not x.get("complete"):
            return 1.0
        bad = x.get("errors", 0) if tool == "event" else 0
        return bad / x["complete"]
    clean_rounds, notes = [], []
    for r in rounds:
        bad = []
        for x in recs:
            # A relay left out of the ratio (misread) does not hold it back.
            if x["round"] != r or x["relay"] in misread:
                continue
            share = failed_share(x)
            if share > GATE:
                bad.append(f"{x['relay']} {pct(share)} failed")
            elif not x.get("relay_up", True):
                bad.append(f"{x['relay']} exited")
        if bad:
            notes.append(f"round {r}: " + ", ".join(bad))
        else:
            clean_rounds.append(r)
    def vals(key, rs, agg):
        res = {}
        for rel in relays:
            xs = [x for x in recs if x["relay"] == rel and x["round"] in rs and x.get(key) is not None]
            res[rel] = agg(xs) if xs else None
        return res
    mean_tps = lambda xs: statistics.mean(x["tps"] for x in xs)
    cpu_per = lambda xs: (sum(x["relay_cpu_s"] for x in xs) * 1e6 / sum(x["complete"] for x in xs)) if sum(x["complete"] for x in xs) else None
    shown_tps = vals("tps", rounds, mean_tps)
    shown_cpu = vals("cpu_us_per_op", rounds, cpu_per)
    clean_tps = {r: v for r, v in vals("tps", clean_rounds, mean_tps).items() if r not in misread}
    clean_cpu = {r: v for r, v in vals("cpu_us_per_op", clean_rounds, cpu_per).items() if r not in misread}
    gate_notes = list(notes)
    left_out = None
    if misread:
        left_out = (", ".join(sorted(misread)) + " left out: greets with AUTH, which nostr-bench"
                    " takes for the OK of its first EVENT")
    bytes_note = None
    if tool == "req":
        bpr = vals("bytes_per_req", rounds, lambda xs: statistics.mean(x["bytes_per_req"] for x in xs))
        upr = vals("bytes_per_req", rounds, lambda xs: statistics.mean(x.get("unescaped_per_req", x["bytes_per_req"]) for x in xs))
        epr = vals("events_per_req", rounds, lambda xs: statistics.mean(x["events_per_req"] for x in xs))
        ours_b = upr.get(OURS)
        off = []
        for p in peers:
            if ours_b and upr.get(p) is not None and abs(upr[p] / ours_b - 1) > BYTES_TOL:
                off.append(f"{p} returns {upr[p] / ours_b - 1:+.1%} bytes per REQ")
        if off:
            bytes_note = "unequal work: " + "; ".join(off)
    lat = vals("avg_ms", rounds, lambda xs: statistics.mean(x["avg_ms"] for x in xs))
    def cell(rel, v, digits=0, with_latency=False):
        t = fmt(v, digits)
        if with_latency and v is not None and lat.get(rel) is not None:
            t += f" ({lat[rel]:.0f} ms)"
        if rel in misread and v is not None:
            t += " (misread)"
        errs = [x for x in recs if x["relay"] == rel and failed_share(x) > GATE]
        if errs and v is not None:
            t += " (" + ", ".join(f"r{x['round']}: {pct(failed_share(x))} failed" for x in errs) + ")"
        return t
    what = f"nostr-bench {tool}, c={c}" + (f", limit {limit}" if tool == "req" else "")
    unit, per = ("events/s", "µs relay CPU per event") if tool == "event" else ("REQs/s", "µs relay CPU per REQ")
    rows.append((unit + " (mean ms per answer)", what, {r: cell(r, shown_tps[r], with_latency=True) for r in relays},
                 ratio_text("higher", clean_tps, gate_notes, bytes_note, len(clean_rounds), len(rounds), left_out)))
    rows.append((per, what, {r: cell(r, shown_cpu[r]) for r in relays},
                 ratio_text("lower", clean_cpu, gate_notes, bytes_note, len(clean_rounds), len(rounds), left_out)))
    if tool == "req":
        rows.append(("bytes returned per REQ as sent / unescaped (events per REQ), check before the run", what,
                     {r: (f"{fmt(bpr[r])} / {fmt(upr[r])} ({fmt(epr[r], 1)})" if bpr[r] is not None else "–") for r in relays},
                     "unescaped must match ours within 1 %"))

# ---- nostrwire load -----------------------------------------------------------
if load:
    def name(x):
        return names.get(x["relay"], x["relay"])
    for sc, unit, per in (("publish", "events/s", "µs relay CPU per event"),
                          ("query", "REQs/s", "µs relay CPU per REQ")):
        res = [x for x in load["rounds"] if x["scenario"] == sc]
        if not res:
            continue
        def timed(x):
            return {l: o for l, o in x["ops"].items() if l not in ("seed", "subscribe")}
        def ops_of(x):
            t = timed(x)
            if sc == "publish":
                t = {l: o for l, o in t.items() if l == "publish"}
            return t
        def succ(x):
            return sum(o["successes"] for o in ops_of(x).values())
        def timeouts(x):
            t = ops_of(x)
            n = sum(o["successes"] + o["failures"] for o in t.values())
            to = sum(o["failures_by_reason"].get("timeout", 0) for o in t.values())
            return to / n if n else 0.0
        rounds = sorted({x["round"] for x in res})
        clean_rounds, notes = [], []
        for r in rounds:
            bad = [f"{name(x)} {pct(timeouts(x))} timed out" for x in res if x["round"] == r and timeouts(x) > GATE]
            if bad:
                notes.append(f"round {r}: " + ", ".join(bad))
            else:
                clean_rounds.append(r)
        def tp(rs):
            v = {}
            for rel in relays:
                xs = [x for x in res if name(x) == rel and x["round"] in rs]
                el = sum(x["elapsed_s"] for x in xs)
                v[rel] = sum(succ(x) for x in xs) / el if xs and el > 0 else None
            return v
        def cpu(rs):
            v = {}
            for rel in relays:
                xs = [x for x in res if name(x) == rel and x["round"] in rs and x.get("relay_cpu_measured_s") is not None]
                n = sum(x.get("measured_ops", 0) for x in xs)
                v[rel] = sum(x["relay_cpu_measured_s"] for x in xs) * 1e6 / n if xs and n else None
            return v
        bytes_note = None
        if sc == "query":
            # Bytes of returned events per REQ, per query class, against ours.
            per_class, ran = {}, {}
            for rel in relays:
                acc = defaultdict(lambda: [0, 0])
                for x in res:
                    if name(x) != rel:
                        continue
                    for l, o in timed(x).items():
                        if l.startswith("query:"):
                            acc[l][0] += o.get("bytes_unescaped", o.get("bytes_received", 0))
                            acc[l][1] += o["successes"] + o["failures"]
                per_class[rel] = {l: b / n for l, (b, n) in acc.items() if n}
                ran[rel] = {l: n for l, (b, n) in acc.items()}
            off = []
            ours_c = per_class.get(OURS, {})
            for p in peers:
                worst = 0.0
                for l, b in ours_c.items():
                    pb = per_class.get(p, {}).get(l)
                    if pb is None or b == 0:
                        continue
                    d = pb / b - 1
                    if abs(d) > abs(worst):
                        worst = d
                        wl = l
                if abs(worst) > BYTES_TOL:
                    note = f"{p} returns {worst:+.1%} bytes per REQ ({wl}"
                    mine, theirs = ran.get(OURS, {}).get(wl, 0), ran.get(p, {}).get(wl, 0)
                    if mine != theirs:
                        # --duration ended one of them first: not the same queries.
                        note += f"; {theirs:,} queries against our {mine:,}: raise --duration"
                    off.append(note + ")")
            if off:
                bytes_note = "unequal work: " + "; ".join(off)
        tcell = {}
        for rel in relays:
            v = tp(rounds)[rel]
            t = fmt(v)
            bad = [f"r{x['round']}: {pct(timeouts(x))} timed out" for x in res if name(x) == rel and timeouts(x) > GATE]
            if bad and v is not None:
                t += " (" + ", ".join(bad) + ")"
            tcell[rel] = t
        what = f"nostrwire load {sc}, c={conns}" + (", six query classes" if sc == "query" else ", real kind mix")
        rows.append((unit, what, tcell,
                     ratio_text("higher", tp(clean_rounds), notes, bytes_note, len(clean_rounds), len(rounds))))
        rows.append((per, what, {r: fmt(cpu(rounds)[r]) for r in relays},
                     ratio_text("lower", cpu(clean_rounds), notes, bytes_note, len(clean_rounds), len(rounds))))
        if sc == "query":
            tot = {}
            for rel in relays:
                xs = [x for x in res if name(x) == rel]
                q = [o for x in xs for l, o in timed(x).items() if l.startswith("query:")]
                b = sum(o.get("bytes_received", 0) for o in q)
                u = sum(o.get("bytes_unescaped", o.get("bytes_received", 0)) for o in q)
                n = sum(o["successes"] + o["failures"] for o in q)
                e = sum(o.get("events_received", 0) for o in q)
                tot[rel] = f"{fmt(b / n)} / {fmt(u / n)} ({fmt(e / n, 1)})" if n else "–"
            rows.append(("bytes returned per REQ as sent / unescaped (events per REQ)", what, tot,
                         "unescaped must match ours within 1 % in every query class"))

print("# Headline figures")
print()
print("Written by scripts/compare-relays.sh. Each relay's figure covers every round (nostr-bench: the "
      "mean of the rounds' rates; nostrwire load: successes over the measured time of all rounds); "
      "a ratio (ours / best peer) uses only the rounds in which no relay timed out on (nostr-bench: "
      "failed) more than 0.1 % of its requests, and is refused (—, with the reason) when the relays "
      "did not return the same bytes per REQ within 1 % (unescaped: JSON string escapes counted as "
      "the characters they stand for, since relays escape differently, e.g. `>` as `\\u003e`). For events/s and REQs/s higher is better, "
      "so a ratio above 1 is ours ahead; for µs of relay CPU per operation lower is better, so a "
      "ratio below 1 is ours ahead. Relay CPU: utime + stime of the relay process from /proc, "
      "read before and after the measured run, divided by the operations the tool counted. "
      "Method: docs/bench-methodology.md, \"nostr-bench beside nostrwire load\".")
print()
print(f"nostr-bench: `-t {threads} -k {secs}`, connections opened at once (`-r` = `-c`), each relay alone "
      f"on a fresh data directory; before `req`, {int(per_tag) * 1000:,} kind-1 notes with nostr-bench's "
      f"tags ({per_tag} per hashtag) replayed into it. nostrwire load: all relays running, scenarios "
      f"interleaved, events signed before the clock.")
print()
print("| figure | tool, setting | " + " | ".join(relays) + " | ours / best peer |")
print("|---|---|" + "---|" * len(relays) + "---|")
for fig, what, cells, ratio in rows:
    print(f"| {fig} | {what} | " + " | ".join(cells.get(r, "–") for r in relays) + f" | {ratio} |")
