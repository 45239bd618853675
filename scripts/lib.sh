#!/usr/bin/env bash
# Shared pieces of the scripts that start agent-mcp beside a fake Ollama (bench.sh, soak.sh,
# bench-pg.sh, conformance.sh) or run the engine against a real model (bench-llm.sh,
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

# Runs the example $1 (bench_llm, bench_coding) with the further arguments against the model
# server at BENCH_LLM_URL (default http://127.0.0.1:11435) serving BENCH_LLM_MODEL (default
# qwen2.5-coder:1.5b), holding the file BENCH_LLM_LOCK with flock while it runs when that is
# set. Built first, outside the lock and the timing; prints a header with the time and commit.
run_llm_example() { # example [args ...]
  local example="$1"
  shift
  local url="${BENCH_LLM_URL:-http://127.0.0.1:11435}"
  local model="${BENCH_LLM_MODEL:-qwen2.5-coder:1.5b}"
  if ! curl -fsS --max-time 5 "$url/api/version" >/dev/null; then
    echo "no Ollama-compatible server answers at $url (set BENCH_LLM_URL; see this script's header)" >&2
    exit 1
  fi
  cargo build --locked --quiet --example "$example"
  local lock=()
  if [ -n "${BENCH_LLM_LOCK:-}" ]; then lock=(flock "$BENCH_LLM_LOCK"); fi
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo '+changes')"
  BENCH_LLM_URL="$url" BENCH_LLM_MODEL="$model" "${lock[@]}" "target/debug/examples/$example" "$@"
}
