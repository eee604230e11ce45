#!/usr/bin/env bash
# Make Debian's chromium available for the report's browser test (tests/modeler/test_report_browser.py).
# `make test` calls this; it does nothing when a chromium is already on PATH. Installing needs root
# and a reachable package mirror; without either it says why and exits 0, and the browser test
# then skips with that reason instead of failing the whole suite.
set -uo pipefail

for name in chromium chromium-browser; do
    if command -v "$name" >/dev/null 2>&1; then
        exit 0
    fi
done

if [ "$(id -u)" != "0" ]; then
    echo "ensure_chromium: chromium not found and not root; run 'apt-get install -y chromium' as root" >&2
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure_chromium: chromium not found and no apt-get on this system; install a chromium yourself" >&2
    exit 0
fi

echo "ensure_chromium: installing Debian's chromium (one time, a few minutes)" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get update -qq >/dev/null || ! apt-get install -y -qq --no-install-recommends chromium >/dev/null; then
    echo "ensure_chromium: apt-get could not install chromium; the browser test will skip" >&2
fi
exit 0
