#!/usr/bin/env bash
# Install Azurite (the Azure Storage emulator) from npm for the az:// registry tests, once,
# into $TAU_AZURITE_DIR (default <repo>/.tools/azurite). Never committed. Shared by nox and the
# tau-data test fixture; prints the path of the azurite-blob launcher.
set -euo pipefail
VERSION="3.35.0"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DEST="${TAU_AZURITE_DIR:-$ROOT/.tools/azurite}"
BIN="$DEST/node_modules/.bin/azurite-blob"
if [ -x "$BIN" ] && [ "$(node -e "console.log(require('$DEST/node_modules/azurite/package.json').version)")" = "$VERSION" ]; then
  echo "$BIN"
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian nodejs/npm for the Azurite tests" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  else
    echo "error: npm is missing; install Node.js (sudo apt-get install -y nodejs npm) for the Azurite tests" >&2
    exit 1
  fi
fi
mkdir -p "$DEST"
echo "installing azurite@$VERSION from npm into $DEST" >&2
npm install --prefix "$DEST" --no-audit --no-fund --silent "azurite@$VERSION" >&2
echo "$BIN"
