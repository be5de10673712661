#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium when it is missing. The browser
# tests and scripts/bench-browser.sh drive it through puppeteer-core (which
# never downloads a browser of its own).
set -euo pipefail
for candidate in "${CHROMIUM:-}" /usr/bin/chromium /usr/bin/chromium-browser; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then
        echo "chromium: $candidate"
        exit 0
    fi
done
if [ "$(id -u)" -ne 0 ]; then
    echo "chromium is missing; run as root: apt-get update && apt-get install -y chromium" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
echo "chromium: /usr/bin/chromium"
