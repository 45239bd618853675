#!/usr/bin/env bash
# Shared pieces of the scripts that start agent-mcp beside a fake Ollama (bench.sh, soak.sh,
# bench-pg.sh, bench-otel.sh, conformance.sh) or run the engine against a real model (bench-llm.sh,
# bench-coding.sh), which first cd to the repository root. Source it: `. scripts/lib.sh`.

# A scratch folder ($WORK) and the background processes ($PIDS) to stop when the script ends.
WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# PIN_SERVER / PIN_CLIENT: taskset prefixes putting servers on $SERVER_CPU and the load
# generator on $CLIENT_CPU (defaults 0 and 1), when there are two cores to split.
PIN_SERVER=()
PIN_CLIENT=()
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  PIN_SERVER=(taskset -c "${SERVER_CPU:-0}")
  PIN_CLIENT=(taskset -c "${CLIENT_CPU:-1}")
fi

# Installs wrk from Debian's packages when it is missing.
ensure_wrk() {
  command -v wrk >/dev/null && return
  echo "== installing wrk (Debian package)"
  if [ "$(id -u)" -eq 0 ]; then
    apt-get install -y wrk >/dev/null || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }
  else
    sudo apt-get install -y wrk >/dev/null
  fi
}

# Starts the fake Ollama at $1 (its binary) with any further VAR=value settings, writing its
# URL to $WORK/$2.url; sets OLLAMA_URL.
start_fake_ollama() { # binary name [VAR=value ...]
  local bin="$1" name="$2"
  shift 2
  env "$@" "$bin" > "$WORK/$name.url" &
  PIDS+=($!)
  for _ in $(seq 1 100); do [ -s "$WORK/$name.url" ] && break; sleep 0.1; done
  OLLAMA_URL="$(head -n1 "$WORK/$name.url")"
  [ -n "$OLLAMA_URL" ] || { echo "the fake Ollama ($name) did not start" >&2; exit 1; }
}

# A free TCP port on 127.0.0.1.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# Runs the model benchmark $1 (bench_llm, bench_coding: [[bench]] targets) with the further arguments against the model
# server at BENCH_LLM_URL (default http://127.0.0.1:11435) serving BENCH_LLM_MODEL (default
# qwen2.5-coder:1.5b), holding the file BENCH_LLM_LOCK with flock while it runs when that is
# set. Built first, outside the lock and the timing; prints a header with the time and commit.
run_model_bench() { # bench-name [args ...]
  local example="$1"
  shift
  local url="${BENCH_LLM_URL:-http://127.0.0.1:11435}"
  local model="${BENCH_LLM_MODEL:-qwen2.5-coder:1.5b}"
  if ! curl -fsS --max-time 5 "$url/api/version" >/dev/null; then
    echo "no Ollama-compatible server answers at $url (set BENCH_LLM_URL; see this script's header)" >&2
    exit 1
  fi
  local exe
  exe="$(bash scripts/bench-exe.sh "$example")"
  local lock=()
  if [ -n "${BENCH_LLM_LOCK:-}" ]; then lock=(flock "$BENCH_LLM_LOCK"); fi
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo '+changes')"
  BENCH_LLM_URL="$url" BENCH_LLM_MODEL="$model" "${lock[@]}" "$exe" "$@"
}

# The head of a benchmark server's agent.yaml on port $1: the fake Ollama at $OLLAMA_URL, the
# limiter on (its cost is part of the figures; $2 false turns it off) with both budgets out of
# the way, and the queue caps too (the runs queue far more than the default 10,000 tasks).
# The caller appends its own audit and store sections.
bench_yaml() { # port [rate-limit-enabled]
  cat <<YAML
ollama:
  url: $OLLAMA_URL
  model: test-model
http:
  bind: 127.0.0.1:$1
rate_limit:
  enabled: ${2:-true}
  per_minute: 4000000000
  burst: 4000000000
  reads:
    per_minute: 4000000000
    burst: 4000000000
mcp:
  max_queued_tasks: 1000000000
  max_queued_per_caller: 1000000000
YAML
}

# bench.sh's agent-mcp server (and scripts/server-profile.sh's): the DEFAULT configuration, what
# `agent-mcp serve` gives a user with no agent.yaml, in the folder $1 — the SQLite store
# (`synchronous: FULL`) where the defaults put it (under XDG_STATE_HOME, here $1/state), audit on
# with its lines on stderr (the file $2 here, with the application log at the default `info`:
# RUST_LOG unset), the workspace $1/ws, auth and limiter on — with four settings changed, each because the load
# needs it, as environment overrides: the model server (the fake Ollama at $OLLAMA_URL,
# serving the default model), the address, and the rate limit's and the queue's budgets (the
# defaults, 1,200 reads and 60 agent_run a minute per caller, 10,000 queued, would answer all
# but the first few hundred requests of a load with 429 or a full queue; the limiter still
# runs and counts every request). The audit lines' stderr is a file, as under an MCP host or
# systemd: on a terminal they go to a file of their own (src/main.rs, audit_off_the_terminal).
# Waits until $3 answers; further VAR=value arguments go to its environment too.
serve_default_agent_mcp() { # dir log url port [VAR=value ...]
  local dir="$1" log="$2" url="$3" port="$4"
  shift 4
  mkdir -p "$dir/ws" "$dir/state"
  (cd "$dir/ws" && exec env -u RUST_LOG XDG_STATE_HOME="$dir/state" OLLAMA_HOST="$OLLAMA_URL" \
    AGENT_MCP_HTTP_BIND="127.0.0.1:$port" \
    AGENT_MCP_RATE_LIMIT_PER_MINUTE=4000000000 AGENT_MCP_RATE_LIMIT_BURST=4000000000 \
    AGENT_MCP_RATE_LIMIT_READS_PER_MINUTE=4000000000 AGENT_MCP_RATE_LIMIT_READS_BURST=4000000000 \
    AGENT_MCP_MCP_MAX_QUEUED_TASKS=1000000000 AGENT_MCP_MCP_MAX_QUEUED_PER_CALLER=1000000000 \
    "$@" "${PIN_SERVER[@]}" "$BIN" serve) 2> "$log" &
  PIDS+=($!)
  for _ in $(seq 1 100); do curl -s -o /dev/null -X POST "$url" 2>/dev/null && return; sleep 0.1; done
  echo "agent-mcp serve ($url) did not start:" >&2
  cat "$log" >&2
  exit 1
}

# The executable of the [[bench]] target $1 (the peers and the acceptance benchmark): built if
# needed, and asked of cargo, which names it by a hash.
bench_exe() { # bench-name
  cargo bench --locked --no-run --message-format=json --bench "$1" 2>/dev/null |
    python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]:
        print(m["executable"])' "$1" | tail -n1
}

# Writes the wrk script $4: POST body $3 with the modern headers (Mcp-Method $1, Mcp-Name $2
# unless empty), or with MCP-Protocol-Version $5 alone when $5 is a 2025 revision (that era
# has no routing headers); it prints "RESULT rps p50_us p99_us errors requests" at the end.
wrk_lua() { # method name body file [protocol-version]
  local body_lua version="${5:-2026-07-28}"
  body_lua="$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$3")"
  cat > "$4" <<LUA
wrk.method = "POST"
wrk.body = $body_lua
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "$version"
LUA
  if [ "$version" = 2026-07-28 ]; then
    echo "wrk.headers[\"Mcp-Method\"] = \"$1\"" >> "$4"
    [ -n "$2" ] && echo "wrk.headers[\"Mcp-Name\"] = \"$2\"" >> "$4"
  fi
  cat >> "$4" <<'LUA'
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %.0f %.0f %.0f %d %d\n",
    summary.requests / (summary.duration / 1e6), latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.status + e.timeout, summary.requests))
end
LUA
}

# One wrk cell on $CLIENT_CPU: $WARMUP s not counted, then $DURATION s of the script $2 against
# $1 with $3 connections; prints "rps p50_us p99_us errors".
wrk_measure() { # url lua conns
  "${PIN_CLIENT[@]}" wrk -t1 -c"$3" -d"${WARMUP}s" -s "$2" "$1" > /dev/null 2>&1 || true
  "${PIN_CLIENT[@]}" wrk -t1 -c"$3" -d"${DURATION}s" --timeout 5s -s "$2" "$1" | awk '/^RESULT/ {print $2, $3, $4, $5}'
}

# Builds the release server and fake Ollama, unless AGENT_MCP_BIN and FAKE_OLLAMA_BIN both
# name other builds (e.g. an older commit's server under the same load); sets BIN and FAKE.
build_release_binaries() {
  if [ -z "${AGENT_MCP_BIN:-}" ] || [ -z "${FAKE_OLLAMA_BIN:-}" ]; then
    echo "== building release binaries"
    cargo build --release --locked --quiet --bin agent-mcp
  fi
  BIN="${AGENT_MCP_BIN:-$PWD/target/release/agent-mcp}"
  FAKE="${FAKE_OLLAMA_BIN:-$(bash scripts/bench-exe.sh fake_ollama --release)}"
}

# Starts `$BIN serve` with the arguments after `--` in the folder $1 on $SERVER_CPU, logging
# warnings to $2, with the VAR=value settings before `--` in its environment; waits until $3
# answers a POST (the script ends, showing the log, when it never does).
serve_agent_mcp() { # dir log url [VAR=value ...] -- [serve arguments ...]
  local dir="$1" log="$2" url="$3" vars=()
  shift 3
  while [ "$#" -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
  [ "$#" -gt 0 ] && shift
  (cd "$dir" && exec env RUST_LOG=warn "${vars[@]}" "${PIN_SERVER[@]}" "$BIN" serve "$@") 2> "$log" &
  PIDS+=($!)
  for _ in $(seq 1 100); do curl -s -o /dev/null -X POST "$url" 2>/dev/null && return; sleep 0.1; done
  echo "agent-mcp serve ($url) did not start:" >&2
  cat "$log" >&2
  exit 1
}
