#!/bin/sh
# Everything a fresh Debian machine with Node 20 needs: system programs, then the npm packages pinned in package-lock.json.
set -eu
cd "$(dirname "$0")/.."
sh scripts/install-system-deps.sh
# npm ci refuses this lock: the registry has only the linux-amd64 build of anvil, so the other platforms are absent from it.
npm install --no-audit --no-fund
