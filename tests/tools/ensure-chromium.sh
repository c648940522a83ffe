#!/usr/bin/env bash
# Make sure Debian's chromium is installed for the browser tests (never downloads a browser
# build of its own). Shared by nox and CI.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian chromium for the browser tests" >&2
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  exit 0
fi
echo "error: /usr/bin/chromium is missing; install it with: sudo apt-get update && sudo apt-get install -y chromium" >&2
exit 1
