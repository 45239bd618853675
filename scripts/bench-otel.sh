#!/usr/bin/env bash
# What OpenTelemetry export costs a request (issue 32): `tools/call agent_status` throughput of
# two `agent-mcp serve` processes started the same way, one with export off and one exporting
# to an OTLP/HTTP receiver that accepts every batch, measured in the same run, alternating
# (off, on, off, on, …) so the machine's load falls on both alike. Every request carries a
# caller's `traceparent` in `_meta`, so the exporting server parents and exports one server
# span per request. Prints the median req/s of each, their ratio, the CPU time each server
# process (all its threads, the export thread included) spent per request, what the receiver
# got and the spans the server's queue dropped. The CPU time per request depends little on
# what else the machine runs, so it is the figure to read when `uptime` shows other load.
#
# On a 2-core machine both servers run on CPU 0 (each with one tokio worker, its export thread
# beside it) and wrk and the receiver on CPU 1.
#
#   scripts/bench-otel.sh                # DURATION=5 ROUNDS=3 CONNS="16 64"
#   DURATION=10 ROUNDS=5 scripts/bench-otel.sh
#   AGENT_MCP_BIN=target/debug/agent-mcp FAKE_OLLAMA_BIN="$(bash scripts/bench-exe.sh fake_ollama)" \
#     DURATION=2 ROUNDS=1 scripts/bench-otel.sh   # a smoke run of the script itself
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION="${DURATION:-5}"
WARMUP="${WARMUP:-1}"
ROUNDS="${ROUNDS:-3}"
CONNS="${CONNS:-16 64}"
SERVER_CPU="${SERVER_CPU:-0}"
CLIENT_CPU="${CLIENT_CPU:-1}"

. scripts/lib.sh
ensure_wrk

# AGENT_MCP_BIN and FAKE_OLLAMA_BIN: other builds (both given: nothing is built here).
if [ -z "${AGENT_MCP_BIN:-}" ] || [ -z "${FAKE_OLLAMA_BIN:-}" ]; then
  echo "== building release binaries"
  cargo build --release --locked --quiet --bin agent-mcp
fi
# Absolute: the servers run in their own folders.
BIN="$(realpath "${AGENT_MCP_BIN:-target/release/agent-mcp}")"
FAKE="$(realpath "${FAKE_OLLAMA_BIN:-$(bash scripts/bench-exe.sh fake_ollama --release)}")"

start_fake_ollama "$FAKE" fake

# The collector: accepts every OTLP/HTTP request (an empty protobuf body is a valid
# Export*ServiceResponse) and counts requests and bytes, written at exit.
RECEIVER_PORT="$(free_port)"
cat > "$WORK/receiver.py" <<'PY'
import http.server, signal, sys
count = {"requests": 0, "bytes": 0}
class H(http.server.BaseHTTPRequestHandler):
    # Keep-alive, as a collector is: one connection for all the exports, not one each.
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        n = int(self.headers.get("content-length") or 0)
        self.rfile.read(n)
        count["requests"] += 1
        count["bytes"] += n
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
def done(*_):
    with open(sys.argv[2], "w") as f:
        f.write(f"{count['requests']} {count['bytes']}\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, done)
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
"${PIN_CLIENT[@]}" python3 "$WORK/receiver.py" "$RECEIVER_PORT" "$WORK/receiver.count" &
RECEIVER_PID=$!
PIDS+=($RECEIVER_PID)

start_server() { # name port [VAR=value ...]
  local name="$1" port="$2"
  shift 2
  mkdir -p "$WORK/$name"
  cat > "$WORK/$name/agent.yaml" <<YAML
ollama:
  url: $OLLAMA_URL
  model: test-model
http:
  bind: 127.0.0.1:$port
rate_limit:
  enabled: true
  per_minute: 4000000000
  burst: 4000000000
  reads:
    per_minute: 4000000000
    burst: 4000000000
audit:
  enabled: false
store:
  backend: sqlite
  path: $WORK/$name/agent-mcp.db
YAML
  (cd "$WORK/$name" && exec env RUST_LOG=warn "$@" "${PIN_SERVER[@]}" "$BIN" serve --config "$WORK/$name/agent.yaml") 2> "$WORK/$name.log" &
  PIDS+=($!)
  echo $! > "$WORK/$name.pid"
  for _ in $(seq 1 100); do curl -s -o /dev/null -X POST "http://127.0.0.1:$port/mcp" 2>/dev/null && break; sleep 0.1; done
}
OFF_PORT="$(free_port)"
start_server off "$OFF_PORT"
ON_PORT="$(free_port)"
start_server on "$ON_PORT" OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$RECEIVER_PORT"

META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}'
post() { # url name body
  curl -sS -X POST "$1" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H "Mcp-Name: $2" --data-binary "$3"
}
RUN_BODY="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"agent_run\",\"arguments\":{\"request\":\"benchmark task\"},$META}}"
task_of() { # port → a finished task's id on that server
  local url="http://127.0.0.1:$1/mcp" id body
  id="$(post "$url" agent_run "$RUN_BODY" | python3 -c 'import json,re,sys
t = json.load(sys.stdin)["result"]["content"][0]["text"]
print(re.search(r"task_id: (\S+)", t).group(1))')"
  body="{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"agent_status\",\"arguments\":{\"task_id\":\"$id\"},$META}}"
  for _ in $(seq 1 100); do
    post "$url" agent_status "$body" | grep -q 'status: completed' && { echo "$body"; return; }
    sleep 0.1
  done
  echo "the benchmark task on port $1 did not complete" >&2
  exit 1
}
wrk_lua tools/call agent_status "$(task_of "$OFF_PORT")" "$WORK/off.lua"
wrk_lua tools/call agent_status "$(task_of "$ON_PORT")" "$WORK/on.lua"

# CALLGRIND=N: instead of the wrk rounds, instructions per request of each server (all its
# threads, the export thread included), counted by callgrind over N requests on one kept-alive
# connection after a warm-up, the counters zeroed in between (load-independent; ±1 %).
if [ -n "${CALLGRIND:-}" ]; then
  command -v valgrind >/dev/null || { echo "CALLGRIND needs valgrind" >&2; exit 2; }
  cat > "$WORK/client.py" <<'PY'
import http.client, json, sys
port, n, body = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].encode()
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
     "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "agent_status"}
for _ in range(n):
    c.request("POST", "/mcp", body, h)
    r = c.getresponse()
    data = r.read()
    assert r.status == 200 and b"completed" in data, (r.status, data[:200])
PY
  for mode in off on; do
    kill "$(cat "$WORK/$mode.pid")" 2>/dev/null || true
  done
  sleep 0.5
  cg_port="$(free_port)"
  for mode in off on; do
    extra=()
    [ "$mode" = on ] && extra=(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$RECEIVER_PORT")
    PIN_SAVED=("${PIN_SERVER[@]}")
    PIN_SERVER=(valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$WORK/cg.$mode.%p")
    rm -rf "$WORK/$mode/agent-mcp.db"*
    start_server "cg$mode" "$cg_port" "${extra[@]}"
    PIN_SERVER=("${PIN_SAVED[@]}")
    pid="$(cat "$WORK/cg$mode.pid")"
    for _ in $(seq 1 300); do curl -s -o /dev/null -X POST "http://127.0.0.1:$cg_port/mcp" 2>/dev/null && break; sleep 0.2; done
    body="$(task_of "$cg_port")"
    python3 "$WORK/client.py" "$cg_port" 300 "$body"
    sleep 1
    callgrind_control -z "$pid" >/dev/null
    python3 "$WORK/client.py" "$cg_port" "$CALLGRIND" "$body"
    sleep 2
    callgrind_control -d "$pid" >/dev/null
    sleep 1
    kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
    total=0; main=0
    for f in "$WORK"/cg."$mode".*; do
      # the dumps taken by callgrind_control -d (…​.1-NN), one per thread
      case "$f" in *.1-*) ;; *) continue ;; esac
      n="$(grep -m1 '^summary:' "$f" | awk '{print $2}')"; n="${n:-0}"
      total=$((total + n))
      [ "$n" -gt "$main" ] && main=$n
      [ -n "${CALLGRIND_KEEP:-}" ] && cp "$f" "$CALLGRIND_KEEP.$mode.$(basename "$f")"
    done
    echo "export $mode: $((total / CALLGRIND)) instructions/request (all threads), busiest thread $((main / CALLGRIND))"
  done
  exit 0
fi

cpu_ticks() { # pid → utime + stime of the whole process, in clock ticks
  awk '{print $14 + $15}' "/proc/$1/stat"
}
measure() { # port lua conns pid → "rps p50 p99 errors cpu-µs-per-request"
  local url="http://127.0.0.1:$1/mcp" before after
  "${PIN_CLIENT[@]}" wrk -t1 -c"$3" -d"${WARMUP}s" -s "$2" "$url" > /dev/null 2>&1 || true
  before="$(cpu_ticks "$4")"
  "${PIN_CLIENT[@]}" wrk -t1 -c"$3" -d"${DURATION}s" --timeout 5s -s "$2" "$url" > "$WORK/wrk.out"
  after="$(cpu_ticks "$4")"
  awk -v t="$((after - before))" -v hz="$(getconf CLK_TCK)" \
    '/^RESULT/ {printf "%s %s %s %s %.2f\n", $2, $3, $4, $5, ($6 > 0) ? t / hz * 1e6 / $6 : 0}' "$WORK/wrk.out"
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo "== load: $(uptime)"
echo "== $ROUNDS rounds of $DURATION s per server and concurrency, alternating; servers on CPU ${PIN_SERVER[*]:-any}, wrk and the receiver on ${PIN_CLIENT[*]:-any}"
echo
echo "| conc | export off req/s (median) | p50 / p99 (last) | export on req/s (median) | p50 / p99 (last) | on / off | CPU µs/request off → on (median) | off / on CPU | errors |"
echo "|---:|---:|---|---:|---|---:|---:|---:|---:|"
for c in $CONNS; do
  : > "$WORK/off.$c"; : > "$WORK/on.$c"; : > "$WORK/off.$c.cpu"; : > "$WORK/on.$c.cpu"
  errors=0
  for _ in $(seq 1 "$ROUNDS"); do
    for mode in off on; do
      port="$OFF_PORT"; [ "$mode" = on ] && port="$ON_PORT"
      read -r rps p50 p99 err cpu <<< "$(measure "$port" "$WORK/$mode.lua" "$c" "$(cat "$WORK/$mode.pid")")"
      echo "$rps" >> "$WORK/$mode.$c"
      echo "$cpu" >> "$WORK/$mode.$c.cpu"
      echo "$p50 $p99" > "$WORK/$mode.$c.lat"
      errors=$((errors + err))
    done
  done
  off="$(median < "$WORK/off.$c")"; on="$(median < "$WORK/on.$c")"
  off_cpu="$(median < "$WORK/off.$c.cpu")"; on_cpu="$(median < "$WORK/on.$c.cpu")"
  read -r o50 o99 < "$WORK/off.$c.lat"; read -r n50 n99 < "$WORK/on.$c.lat"
  ratio="$(awk -v a="$on" -v b="$off" 'BEGIN { printf "%.1f %%", 100*a/b }')"
  cpu_ratio="$(awk -v a="$off_cpu" -v b="$on_cpu" 'BEGIN { printf "%.1f %%", (b > 0) ? 100*a/b : 0 }')"
  echo "| $c | $off ($(paste -sd/ "$WORK/off.$c")) | ${o50} µs / ${o99} µs | $on ($(paste -sd/ "$WORK/on.$c")) | ${n50} µs / ${n99} µs | $ratio | $off_cpu → $on_cpu | $cpu_ratio | $errors |"
done
echo
echo "== load after: $(uptime)"
dropped="$(curl -s "http://127.0.0.1:$ON_PORT/metrics" | awk '/^agent_mcp_otel_spans_dropped_total/ {print $2}')"
failures="$(curl -s "http://127.0.0.1:$ON_PORT/metrics" | awk '/^agent_mcp_otel_export_failures_total\{signal="traces"\}/ {print $2}')"
echo "exporting server: spans dropped at the full queue: ${dropped:-?}, failed exports: ${failures:-?}"
kill -TERM "$RECEIVER_PID"
wait "$RECEIVER_PID" 2>/dev/null || true
read -r requests bytes < "$WORK/receiver.count" || true
echo "receiver: ${requests:-?} OTLP requests, ${bytes:-?} bytes (before the exporting server's exit)"
