#!/bin/sh
# Builds the extension's .vsix: the dependencies from the npm registry (package-lock.json),
# the extension bundled with esbuild (so the package needs no node_modules), then
# `vsce package --no-dependencies`. Usage: sh package.sh [OUT.vsix] (default xlalint.vsix).
set -eu
cd "$(dirname "$0")"
out="${1:-xlalint.vsix}"
[ -d node_modules ] || npm ci --no-audit --no-fund
npm run bundle
npx vsce package --no-dependencies --allow-missing-repository --skip-license --out "$out"
