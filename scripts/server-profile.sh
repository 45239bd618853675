#!/usr/bin/env bash
# Instructions per `tools/call agent_status` of a whole server process (all its threads),
# counted by callgrind: bench.sh's agent-mcp server (the default configuration: full stack, audit
# lines on stderr (a file), the limiter on with its budgets out of the way, SQLite `synchronous:
# FULL`, one completed task; scripts/lib.sh, serve_default_agent_mcp) and, with
# PEERS=1, three peers the same way: bench.sh's two (bare hyper answering that status response
# as a fixed body, and the rmcp peer) and the floor peer (bare hyper plus the least any MCP
# server does on this path: a typed parse, a map lookup, the same text, the answer written). Each over N requests on one kept-alive connection after 300
# of warm-up, the counters zeroed in between. Unmoved by the machine's load (±1 %), unlike
# bench.sh's wall clock; benches/README.md's model turns the counts into req/s. Needs valgrind.
#
#   bash scripts/server-profile.sh                         # agent-mcp, N=2000
#   PEERS=1 bash scripts/server-profile.sh                 # and bare hyper, the floor and rmcp
#   N=5000 KEEP=/tmp/cg bash scripts/server-profile.sh     # keep the per-thread dumps, /tmp/cg.*
#   AGENT_MCP_BIN=/tmp/agent-mcp-old FAKE_OLLAMA_BIN=… bash scripts/server-profile.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "server-profile: needs valgrind (apt install valgrind)" >&2; exit 2; }
N="${N:-2000}"
. scripts/lib.sh
build_release_binaries
start_fake_ollama "$FAKE" fake FAKE_OLLAMA_MODEL=qwen3:8b

# The load: agent_status of one task, as bench.sh sends it. With a task id the client asks about
# that task; without one it queues a task and waits for it to complete first. It zeroes the
# server's counters after the warm-up and dumps them after the N counted requests.
cat > "$WORK/client.py" <<'PY'
import http.client, json, re, subprocess, sys, time
port, n, pid, task = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}
c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
def call(name, args, i):
    body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                       "params": {"name": name, "arguments": args, "_meta": meta}}).encode()
    c.request("POST", "/mcp", body, {"Content-Type": "application/json",
              "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
              "Mcp-Method": "tools/call", "Mcp-Name": name})
    r = c.getresponse()
    data = r.read()
    assert r.status == 200, (r.status, data[:300])
    return data
if task == "-":
    text = json.loads(call("agent_run", {"request": "benchmark task"}, 1))["result"]["content"][0]["text"]
    task = re.search(r"task_id: (\S+)", text).group(1)
    for _ in range(200):
        if b"status: completed" in call("agent_status", {"task_id": task}, 2):
            break
        time.sleep(0.1)
    else:
        sys.exit("the benchmark task did not complete")
for _ in range(300):
    data = call("agent_status", {"task_id": task}, 3)
assert b"status: completed" in data, data[:300]
open(sys.argv[5], "wb").write(data)
subprocess.run(["callgrind_control", "-z", pid], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(n):
    call("agent_status", {"task_id": task}, 4)
time.sleep(1)
subprocess.run(["callgrind_control", "-d", pid], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(task)
PY

# Each server on CPU 0 like bench.sh (so agent-mcp has one tokio worker, as it has there).
CG=("${PIN_SERVER[@]}" valgrind --tool=callgrind --separate-threads=yes)
# Sums the dumps of server $1 (its callgrind out-file prefix), prints one line for it.
report() { # name prefix
  local total=0 main=0 f n
  for f in "$2".*.1-*; do
    n="$(grep -m1 '^summary:' "$f" | awk '{print $2}')"; n="${n:-0}"
    total=$((total + n))
    [ "$n" -gt "$main" ] && main=$n
    [ -n "${KEEP:-}" ] && cp "$f" "$KEEP.$1.$(basename "$f")"
  done
  printf '%-10s %8d instructions/request (all threads), busiest thread %d, over %d requests\n' \
    "$1" $((total / N)) $((main / N)) "$N"
  COUNT[$1]=$((total / N))
}
declare -A COUNT
# Runs the client against server $1 (pid $2) on port $3; sets TASK.
load() { # name pid port task
  TASK="$(python3 "$WORK/client.py" "$3" "$N" "$2" "$4" "$WORK/$1.response")"
  kill -TERM "$2" 2>/dev/null || true
  wait "$2" 2>/dev/null || true
}

PORT="$(free_port)"
PIN_SERVER=("${CG[@]}" --callgrind-out-file="$WORK/agent.%p")
serve_default_agent_mcp "$WORK" "$WORK/server.log" "http://127.0.0.1:$PORT/mcp" "$PORT"
load agent-mcp "${PIDS[-1]}" "$PORT" -
report agent-mcp "$WORK/agent"

if [ -n "${PEERS:-}" ]; then
  for peer in hyper floor rmcp; do
    exe="$(bench_exe "${peer}_peer")"
    [ -x "$exe" ] || { echo "missing bench binary ${peer}_peer" >&2; exit 1; }
    if [ "$peer" = hyper ]; then arg="$WORK/agent-mcp.response"; else arg="$TASK"; fi
    "${CG[@]}" --callgrind-out-file="$WORK/$peer.%p" "$exe" --bench "$arg" > "$WORK/$peer.url" 2> "$WORK/$peer.log" &
    PIDS+=($!)
    for _ in $(seq 1 300); do [ -s "$WORK/$peer.url" ] && break; sleep 0.1; done
    url="$(head -n1 "$WORK/$peer.url")"
    [ -n "$url" ] || { echo "$peer did not start" >&2; cat "$WORK/$peer.log" >&2; exit 1; }
    port="${url##*:}"; port="${port%%/*}"
    load "$peer" "${PIDS[-1]}" "$port" "$TASK"
    report "$peer" "$WORK/$peer"
  done
  # benches/README.md's fit of the quiet 2026-12-04 wall clock: a request costs the server's
  # core K = 2.7 µs (kernel: socket reads, writes, epoll) plus its instructions at 5.06 k/µs.
  awk -v a="${COUNT[agent-mcp]}" -v h="${COUNT[hyper]}" -v f="${COUNT[floor]}" -v r="${COUNT[rmcp]}" 'BEGIN {
    ta = 2.7 + a / 5060; th = 2.7 + h / 5060; tf = 2.7 + f / 5060; tr = 2.7 + r / 5060
    printf "by the model (2.7 us + instructions / 5.06 k a us): agent-mcp %.1f us a request, %.0f %% of bare hyper (%.1f us), %.2fx the rmcp peer (%.1f us); the floor peer %.1f us, %.0f %% of bare hyper\n", ta, 100 * th / ta, th, tr / ta, tr, tf, 100 * th / tf
  }'
fi
