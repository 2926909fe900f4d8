#!/bin/sh
# Everything a fresh Debian machine with Node 20 needs: system programs, then the npm packages of package-lock.json.
set -eu
cd "$(dirname "$0")/.."
sh scripts/install-system-deps.sh
npm ci --no-audit --no-fund
