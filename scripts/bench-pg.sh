#!/usr/bin/env bash
# PostgreSQL vs SQLite, same run (issue 15): `agent-mcp serve` with each store (full layer
# stack, fake Ollama, rate limits set out of the way), loaded with wrk on loopback at
# concurrency 16 (CONC to change): `tools/call agent_run` accepts/s (each call durably stores a
# task: SQLite FULL, PostgreSQL with its default synchronous_commit=on) and
# `tools/call agent_status` req/s of one finished task.
#
# Runs itself inside scripts/postgres.sh (a throwaway PostgreSQL 15) unless
# AGENT_MCP_TEST_PG_URL is already set.
#
#   bash scripts/bench-pg.sh            # DURATION=5 WARMUP=1 CONC=16
#   RATE_LIMIT=false bash scripts/bench-pg.sh   # without the limiter (with PostgreSQL, each
#                                               # request's bucket is a database round trip)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${AGENT_MCP_TEST_PG_URL:-}" ]; then
  exec bash scripts/postgres.sh bash "$0" "$@"
fi
DURATION="${DURATION:-5}"
WARMUP="${WARMUP:-1}"
CONC="${CONC:-16}"
RATE_LIMIT="${RATE_LIMIT:-true}"

. scripts/lib.sh
ensure_wrk

build_release_binaries


start_fake_ollama "$FAKE" fake

DB="agent_mcp_bench_$$"
psql -q "$AGENT_MCP_TEST_PG_URL" -c "CREATE DATABASE $DB"
PG_URL="${AGENT_MCP_TEST_PG_URL%/*}/$DB"

start_server() { # name store-yaml → sets URL
  local name="$1" port
  port="$(free_port)"
  {
    bench_yaml "$port" "$RATE_LIMIT"
    cat <<YAML
audit:
  enabled: false
store:
$2
YAML
  } > "$WORK/$name.yaml"
  URL="http://127.0.0.1:$port/mcp"
  serve_agent_mcp "$WORK" "$WORK/$name.log" "$URL" -- --config "$WORK/$name.yaml"
}

start_server sqlite "  backend: sqlite
  path: $WORK/sqlite/agent-mcp.db
  synchronous: FULL"
SQLITE_URL="$URL"
start_server postgres "  backend: postgres
  url: $PG_URL"
PG_SERVER_URL="$URL"

META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
post() { # url name body
  curl -sS -X POST "$1" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H "Mcp-Name: $2" --data-binary "$3"
}
RUN_BODY="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"agent_run\",\"arguments\":{\"request\":\"benchmark task\"},$META}}"

declare -A R
for store in sqlite postgres; do
  if [ "$store" = sqlite ]; then u="$SQLITE_URL"; else u="$PG_SERVER_URL"; fi
  task="$(post "$u" agent_run "$RUN_BODY" | python3 -c 'import json,re,sys
t = json.load(sys.stdin)["result"]["content"][0]["text"]
print(re.search(r"task_id: (\S+)", t).group(1))')"
  status_body="{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"agent_status\",\"arguments\":{\"task_id\":\"$task\"},$META}}"
  for _ in $(seq 1 100); do
    post "$u" agent_status "$status_body" | grep -q 'status: completed' && break
    sleep 0.1
  done
  post "$u" agent_status "$status_body" | grep -q 'status: completed' || { echo "$store: the first task did not complete" >&2; exit 1; }
  wrk_lua tools/call agent_status "$status_body" "$WORK/$store-status.lua"
  wrk_lua tools/call agent_run "$RUN_BODY" "$WORK/$store-run.lua"
  R[$store,status]="$(wrk_measure "$u" "$WORK/$store-status.lua" "$CONC")"
  R[$store,run]="$(wrk_measure "$u" "$WORK/$store-run.lua" "$CONC")"
done

fmt_lat() { awk -v us="$1" 'BEGIN { if (us >= 1000) printf "%.2f ms", us/1000; else printf "%d µs", us }'; }
echo "== $(nproc) CPUs, $DURATION s per cell after $WARMUP s warm-up, c=$CONC, rate_limit.enabled: $RATE_LIMIT; $(uptime | sed 's/.*load/load/')"
echo
echo "| load (c=$CONC) | SQLite req/s | p50 / p99 | PostgreSQL req/s | p50 / p99 | PostgreSQL/SQLite |"
echo "|---|---:|---|---:|---|---:|"
for load in run status; do
  name="tools/call agent_run (accepts/s)"; [ "$load" = status ] && name="tools/call agent_status"
  read -r s_rps s50 s99 serr <<< "${R[sqlite,$load]}"
  read -r p_rps p50 p99 perr <<< "${R[postgres,$load]}"
  errs=""; [ "$serr$perr" != "00" ] && errs=" (errors: $serr/$perr)"
  echo "| $name | $s_rps | $(fmt_lat "$s50") / $(fmt_lat "$s99") | $p_rps | $(fmt_lat "$p50") / $(fmt_lat "$p99") | $(awk -v a="$p_rps" -v b="$s_rps" 'BEGIN { printf "%.2f×", a/b }')$errs |"
done
