#!/usr/bin/env bash
# Soak test (issue 20; not run by CI): `agent-mcp serve` at full load for N minutes, printing
# the server's RSS and req/s for every minute, once with nothing scraping /metrics and once
# with a scraper (GET /metrics every second).
#
# The server: default configuration except the rate limit (raised out of the way), the audit
# log in a file rotated by size (audit.max_bytes 256 MiB, keep 2, so the disk stays bounded
# and rotation runs under load), the SQLite store in a temp directory, a fake Ollama. The load:
# modern-era `tools/call agent_status` of a finished task with wrk (c=64, one thread), one
# wrk run per minute (STEP=60 s). On a 2-core machine the server runs on CPU 0 and wrk on CPU 1.
#
#   scripts/soak.sh                      # MINUTES=10, MODES="none scrape"
#   MINUTES=3 MODES=none scripts/soak.sh
#   AGENT_MCP_BIN=/tmp/agent-mcp-old MINUTES=3 MODES=none scripts/soak.sh
#
# Prints, per mode, a table (minute, req/s, RSS MiB, 1-min load average) and the checks:
# RSS growth after the first minute <= 10 MiB; last minute's req/s >= 90 % of the first's.
set -euo pipefail
cd "$(dirname "$0")/.."

MINUTES="${MINUTES:-10}"
MODES="${MODES:-none scrape}"
CONNS="${CONNS:-64}"
# Seconds per measured step (a "minute"); shorten only to try the script out.
STEP="${STEP:-60}"
SERVER_CPU="${SERVER_CPU:-0}"
CLIENT_CPU="${CLIENT_CPU:-1}"

command -v wrk >/dev/null || { echo "soak.sh needs wrk (apt-get install wrk)" >&2; exit 2; }
. scripts/lib.sh

# AGENT_MCP_BIN: soak another build of the server (e.g. an older commit's) with the same load.
build_release_binaries


start_fake_ollama "$FAKE" fake

META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
post() { # url method name body
  curl -sS -X POST "$1" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' \
    -H "Mcp-Method: $2" -H "Mcp-Name: $3" --data-binary "$4"
}
rss_mib() { awk '/^VmRSS:/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }
loadavg() { cut -d' ' -f1 /proc/loadavg; }

# Starts a fresh server; sets SERVER_PID, AGENT_URL, BASE_URL, STATUS_BODY.
start_server() {
  local dir="$WORK/$1"
  mkdir -p "$dir"
  local port
  port="$(free_port)"
  {
    bench_yaml "$port"
    cat <<YAML
audit:
  file: $dir/audit.jsonl
  max_bytes: 256 MiB
  keep: 2
store:
  path: $dir/store/agent-mcp.db
YAML
  } > "$dir/agent.yaml"
  (cd "$dir" && RUST_LOG=warn exec "${PIN_SERVER[@]}" "$BIN" serve --config "$dir/agent.yaml") 2> "$dir/server.log" &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  BASE_URL="http://127.0.0.1:$port"
  AGENT_URL="$BASE_URL/mcp"
  for _ in $(seq 1 100); do curl -s -o /dev/null "$BASE_URL/healthz" && break; sleep 0.1; done
  local run="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"agent_run\",\"arguments\":{\"request\":\"soak task\"},$META}}"
  local task
  task="$(post "$AGENT_URL" tools/call agent_run "$run" | python3 -c 'import json,re,sys
t = json.load(sys.stdin)["result"]["content"][0]["text"]
print(re.search(r"task_id: (\S+)", t).group(1))')"
  STATUS_BODY="{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"agent_status\",\"arguments\":{\"task_id\":\"$task\"},$META}}"
  for _ in $(seq 1 100); do
    post "$AGENT_URL" tools/call agent_status "$STATUS_BODY" | grep -q 'status: completed' && return
    sleep 0.1
  done
  echo "the soak task did not complete" >&2
  exit 1
}

LUA="$WORK/status.lua"

echo "== $(date -u +%FT%TZ); load: $(uptime)"
echo "== server: $BIN"
echo "== $MINUTES min per mode, c=$CONNS; server on ${PIN_SERVER[*]:-any CPU}, wrk on ${PIN_CLIENT[*]:-any CPU}"
status=0
for mode in $MODES; do
  start_server "$mode"
  wrk_lua tools/call agent_status "$STATUS_BODY" "$LUA"
  SCRAPER=""
  if [ "$mode" = scrape ]; then
    (while :; do curl -s -o /dev/null "$BASE_URL/metrics"; sleep 1; done) &
    SCRAPER=$!
    PIDS+=("$SCRAPER")
  fi
  echo
  echo "== mode: $mode (scraper: $([ -n "$SCRAPER" ] && echo 'GET /metrics every 1 s' || echo none)); RSS at start $(rss_mib "$SERVER_PID") MiB"
  echo "| minute | req/s | requests | errors | RSS MiB | load avg |"
  echo "|---:|---:|---:|---:|---:|---:|"
  first_rps="" last_rps="" first_rss="" max_rss=0
  for minute in $(seq 1 "$MINUTES"); do
    read -r rps requests errors < <("${PIN_CLIENT[@]}" wrk -t1 -c"$CONNS" -d"${STEP}s" --timeout 5s -s "$LUA" "$AGENT_URL" |
      awk '/^RESULT/ {print $2, $6, $5}')
    rss="$(rss_mib "$SERVER_PID")"
    echo "| $minute | $rps | $requests | $errors | $rss | $(loadavg) |"
    [ -z "$first_rps" ] && first_rps="$rps" && first_rss="$rss"
    last_rps="$rps"
    max_rss="$(awk -v a="$max_rss" -v b="$rss" 'BEGIN { print (b > a) ? b : a }')"
  done
  [ -n "$SCRAPER" ] && kill "$SCRAPER" 2>/dev/null || true
  growth="$(awk -v a="$max_rss" -v b="$first_rss" 'BEGIN { printf "%.1f", a - b }')"
  ratio="$(awk -v a="$last_rps" -v b="$first_rps" 'BEGIN { printf "%.0f", 100 * a / b }')"
  rss_ok="$(awk -v g="$growth" 'BEGIN { print (g <= 10) ? "met" : "MISSED" }')"
  rps_ok="$(awk -v r="$ratio" 'BEGIN { print (r >= 90) ? "met" : "MISSED" }')"
  echo
  echo "- $mode: RSS growth after minute 1 (highest minus minute 1) <= 10 MiB — $rss_ok (${growth} MiB)"
  echo "- $mode: last minute's req/s >= 90 % of the first's — $rps_ok (${ratio} %)"
  echo "- $mode: audit files: $(ls "$WORK/$mode" | grep -c '^audit.jsonl') (audit.keep 2 + the current one at most)"
  { [ "$rss_ok" = met ] && [ "$rps_ok" = met ]; } || status=1
  kill "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
done
echo
echo "== $(date -u +%FT%TZ); load after: $(uptime)"
exit "$status"
