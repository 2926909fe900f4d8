#!/bin/sh
# Everything a fresh Debian machine with Node 20 needs: system programs, then the npm packages pinned in package-lock.json.
set -eu
cd "$(dirname "$0")/.."
sh scripts/install-system-deps.sh
# The lock is complete (every platform's anvil build), so npm ci installs exactly it and leaves the tree clean.
npm ci --no-audit --no-fund
