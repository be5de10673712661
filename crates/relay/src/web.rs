//! Stage 1: the relay's page for people (`GET /` with `Accept: text/html`)
//! and the counters it refreshes from (`GET /stats.json`).
//!
//! The page is one self-contained document: no external scripts, styles or
//! fonts. It shows the NIP-11 facts and polls `/stats.json` once a second;
//! events per second are the difference of two polls.

use std::sync::atomic::Ordering;

use serde_json::json;

use crate::Shared;

/// Path of the JSON counters.
pub const STATS_PATH: &str = "/stats.json";

/// The reply for a plain HTTP request this module serves, as
/// `(content type, body)`; `None` leaves the request to the caller.
pub fn respond(shared: &Shared, path: &str, accept_html: bool) -> Option<(&'static str, String)> {
    let path = path.split('?').next().unwrap_or(path);
    if path == STATS_PATH {
        return Some(("application/json", stats_json(shared)));
    }
    if path == "/" && accept_html {
        return Some(("text/html; charset=utf-8", page(shared)));
    }
    None
}

/// The live counters: connections, events stored since start and their
/// canonical JSON size, the database's events and bytes on disk.
pub fn stats_json(shared: &Shared) -> String {
    let m = &shared.metrics;
    let stats = shared.store.stats().ok();
    json!({
        "connections": m.connections_open.load(Ordering::Relaxed),
        "connections_total": m.connections_total.load(Ordering::Relaxed),
        "events_stored_since_start": m.events_stored.load(Ordering::Relaxed),
        "json_bytes_stored_since_start": m.json_bytes_stored.load(Ordering::Relaxed),
        "db_events": stats.as_ref().map(|s| s.events),
        "disk_bytes": stats.as_ref().map(|s| s.disk_bytes),
    })
    .to_string()
}

/// The HTML page, with the NIP-11 document embedded as JSON data.
pub fn page(shared: &Shared) -> String {
    let info = crate::nip11::document(&shared.current_config(), &shared.dictionaries.names());
    // Inside <script>, only `</` could end the element early.
    let info = info.replace("</", "<\\/");
    PAGE.replace("{{NIP11}}", &info)
        .replace("{{STATS}}", STATS_PATH)
}

const PAGE: &str = r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>nostrwire relay</title>
<style>
  :root { color-scheme: light dark; --fg: #1d2330; --muted: #5d6675; --line: #d9dee6; --card: #f5f7fa; --accent: #6b3fd4; }
  @media (prefers-color-scheme: dark) { :root { --fg: #e8ebf0; --muted: #9aa3b2; --line: #333a46; --card: #1b2029; --accent: #a98bff; } }
  body { font: 16px/1.5 system-ui, sans-serif; color: var(--fg); max-width: 52rem; margin: 2rem auto; padding: 0 1rem; }
  h1 { margin: 0 0 .25rem; font-size: 1.8rem; }
  p.lead { color: var(--muted); margin-top: 0; }
  code { font: .9em ui-monospace, monospace; background: var(--card); padding: .1em .3em; border-radius: 4px; }
  .grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(11rem, 1fr)); gap: .75rem; margin: 1.5rem 0; }
  .card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: .75rem 1rem; }
  .card .v { font-size: 1.6rem; font-weight: 600; font-variant-numeric: tabular-nums; color: var(--accent); }
  .card .k { color: var(--muted); font-size: .85rem; }
  table { border-collapse: collapse; width: 100%; }
  td { border-top: 1px solid var(--line); padding: .35rem .5rem; vertical-align: top; }
  td:first-child { color: var(--muted); width: 14rem; }
  footer { color: var(--muted); font-size: .85rem; margin-top: 2rem; }
</style>
</head>
<body>
<h1 id="name">nostrwire relay</h1>
<p class="lead" id="description"></p>
<p>This is a <a href="https://github.com/nostr-protocol/nips">Nostr</a> relay. Connect a Nostr
client to <code id="url"></code>. Clients that offer the <code>nostrwire.v1</code>
WebSocket subprotocol get events as binary nwb records; all others speak NIP-01 JSON.</p>
<div class="grid">
  <div class="card"><div class="v" id="connections">–</div><div class="k">open connections</div></div>
  <div class="card"><div class="v" id="rate">–</div><div class="k">events stored per second</div></div>
  <div class="card"><div class="v" id="db_events">–</div><div class="k">stored events</div></div>
  <div class="card"><div class="v" id="disk">–</div><div class="k">on disk</div></div>
  <div class="card"><div class="v" id="since">–</div><div class="k">events stored since start</div></div>
  <div class="card"><div class="v" id="json">–</div><div class="k">their JSON size</div></div>
</div>
<h2>Relay information (NIP-11)</h2>
<table id="facts"></table>
<footer>Counters refresh every second from <code>{{STATS}}</code>.
<span id="status"></span></footer>
<script id="nip11" type="application/json">{{NIP11}}</script>
<script>
"use strict";
const info = JSON.parse(document.getElementById("nip11").textContent);
const $ = (id) => document.getElementById(id);
$("name").textContent = info.name || "nostrwire relay";
$("description").textContent = info.description || "";
$("url").textContent = location.origin.replace(/^http/, "ws");
const facts = [
  ["software", info.software + " " + info.version],
  ["supported NIPs", (info.supported_nips || []).join(", ")],
];
for (const [k, v] of Object.entries(info.limitation || {})) facts.push([k.replace(/_/g, " "), String(v)]);
for (const [k, v] of facts) {
  const tr = $("facts").insertRow();
  tr.insertCell().textContent = k;
  tr.insertCell().textContent = v;
}
const num = (n) => n == null ? "–" : n.toLocaleString("en-US");
const bytes = (n) => {
  if (n == null) return "–";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) { n /= 1000; i++; }
  return (i ? n.toFixed(1) : String(n)) + " " + units[i];
};
let last = null;
async function refresh() {
  try {
    const s = await (await fetch("{{STATS}}", { cache: "no-store" })).json();
    const t = performance.now();
    $("connections").textContent = num(s.connections);
    $("db_events").textContent = num(s.db_events);
    $("disk").textContent = bytes(s.disk_bytes);
    $("since").textContent = num(s.events_stored_since_start);
    $("json").textContent = bytes(s.json_bytes_stored_since_start);
    if (last) {
      const rate = (s.events_stored_since_start - last.n) / ((t - last.t) / 1000);
      $("rate").textContent = rate.toFixed(rate < 10 ? 1 : 0);
    }
    last = { n: s.events_stored_since_start, t };
    $("status").textContent = "Updated " + new Date().toLocaleTimeString() + ".";
    document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
  } catch (e) {
    $("status").textContent = "The relay did not answer.";
  }
}
refresh();
setInterval(refresh, 1000);
</script>
</body>
</html>
"##;
