#!/usr/bin/env bash
# Optional: Debian's chromium, for the one service test that drives a real browser
# (tests/serve/test_serve_browser.py, headless through Playwright, which never downloads a browser
# of its own). Without it that test skips and says why. CI runs this step; the README's install
# does not. Needs root and apt-get; does nothing when /usr/bin/chromium is already there.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "warning: chromium is missing and apt-get cannot install it here; the browser test will skip" >&2
    exit 0
fi
{ apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } \
    || echo "warning: could not install chromium; the browser test will skip" >&2
