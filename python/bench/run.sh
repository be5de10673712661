#!/usr/bin/env bash
# Runs the three Python benchmarks in one go (same host, same build) and
# leaves their raw results in $NOSTRWIRE_BENCH_DATA (default python/bench/data).
# Needs: the package installed (maturin develop --release), the competitors
# (pip install orjson coincurve zstandard nostr-sdk websockets) and the
# release binary (cargo build --release). Takes about 15 minutes, most of
# it making the 1M-event dump once (2.7 GB of JSON Lines, 1.9 GB of nwb).
set -euo pipefail
cd "$(dirname "$0")"
python=${PYTHON:-python3}
"$python" bench_events.py "${EVENT_ROUNDS:-9}"
"$python" bench_relay.py "${RELAY_ROUNDS:-7}"
"$python" bench_files.py "${FILE_ROUNDS:-3}"
