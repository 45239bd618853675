#!/usr/bin/env bash
# Side-by-side HTTP load test on loopback, in one run (issue 8):
#   (a) `agent-mcp serve` in its DEFAULT configuration (issue 54: what a user without an
#       agent.yaml gets, and what an outsider measures): the full layer stack (metrics, audit
#       lines on stderr, auth, rate limit, tasks, validate, images), the SQLite store (FULL)
#       where the defaults put it, the application log at `info`; four settings changed through
#       the environment because the load needs them (scripts/lib.sh, serve_default_agent_mcp:
#       the fake Ollama, the address, the rate limit's and the queue's budgets);
#   (b) an rmcp peer (benches/peers/rmcp_peer.rs): stateless Streamable HTTP, JSON responses,
#       the same agent_status work (parse args, map lookup, the same status text);
#   (c) bare hyper answering a fixed JSON body (benches/peers/hyper_peer.rs): the ceiling;
#   (d) for agent_status only, the floor of any MCP server on hyper + serde_json
#       (benches/peers/floor_peer.rs): bare hyper plus a typed parse, a map lookup, the same
#       text and the answer written, and no checks at all; how much of (c) is left to spend.
# Loads: modern-era (2026-07-28 headers and _meta) `tools/call agent_status` and `tools/list`,
# and the same `agent_status` as a 2025-06-18 client sends it (that version's header alone, no
# _meta, no Mcp-Method / Mcp-Name: what most clients send today, and an outsider's load), and that
# shape for an id the server does not have, at
# concurrency 1, 16 and 64, with wrk (installed with apt-get if missing). The peers are built
# with the server's profile (the bench profile inherits release: thin LTO, one codegen unit).
# Then: agent_run accepted durably at c=16 (agent-mcp only); agent_status with QUEUED (100,000)
# tasks waiting vs none, and the RSS; and agent_run with 4 x 5 MiB images
# to durable acceptance vs its floor, each part measured in the same run (benches/accept.rs).
#
# On a 2-core machine the servers run on CPU 0 and wrk on CPU 1 (taskset), so the load
# generator does not steal the server's core; every server gets one tokio worker thread.
#
#   scripts/bench.sh                 # DURATION=5 WARMUP=1 by default (seconds per cell)
#   DURATION=10 scripts/bench.sh
#   AGENT_MCP_BIN=/tmp/agent-mcp-old scripts/bench.sh  # another build of the server
#   ROWS="run queue" scripts/bench.sh  # only some rows: status (status + list, three servers),
#                                      # run, queue, images; all four by default
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION="${DURATION:-5}"
WARMUP="${WARMUP:-1}"
CONCURRENCY=(1 16 64)
SERVER_CPU="${SERVER_CPU:-0}"
CLIENT_CPU="${CLIENT_CPU:-1}"
ROWS="${ROWS:-status run queue images}"
want() { [[ " $ROWS " == *" $1 "* ]]; }
for row in $ROWS; do
  case "$row" in status|run|queue|images) ;; *) echo "ROWS: unknown row '$row' (status, run, queue, images)" >&2; exit 2;; esac
done

. scripts/lib.sh
ensure_wrk

echo "== building release binaries"
cargo build --release --locked --quiet --bin agent-mcp
# AGENT_MCP_BIN: measure another build of the server (e.g. an older commit's) with the same load.
BIN="${AGENT_MCP_BIN:-$PWD/target/release/agent-mcp}"
FAKE="$(bash scripts/bench-exe.sh fake_ollama --release)"
RMCP_PEER="$(bench_exe rmcp_peer)"
HYPER_PEER="$(bench_exe hyper_peer)"
FLOOR_PEER="$(bench_exe floor_peer)"
ACCEPT="$(bench_exe accept)"
for exe in "$RMCP_PEER" "$HYPER_PEER" "$FLOOR_PEER" "$ACCEPT"; do [ -x "$exe" ] || { echo "missing bench binary ($exe)" >&2; exit 1; }; done


# Starts a server that prints its URL on stdout's first line; sets $URL.
start_url_printer() {
  local name="$1"; shift
  "${PIN_SERVER[@]}" "$@" > "$WORK/$name.url" 2> "$WORK/$name.log" &
  PIDS+=($!)
  for _ in $(seq 1 100); do [ -s "$WORK/$name.url" ] && break; sleep 0.1; done
  URL="$(head -n1 "$WORK/$name.url")"
  [ -n "$URL" ] || { echo "$name did not start" >&2; cat "$WORK/$name.log" >&2; exit 1; }
}

# The fake Ollama serves the default configuration's model.
start_fake_ollama "$FAKE" fake FAKE_OLLAMA_MODEL=qwen3:8b

PORT="$(free_port)"
AGENT_URL="http://127.0.0.1:$PORT/mcp"
serve_default_agent_mcp "$WORK" "$WORK/server.log" "$AGENT_URL" "$PORT"

META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
post() { # url method name body [protocol-version]
  local -a h=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream'
              -H "MCP-Protocol-Version: ${5:-2026-07-28}")
  if [ "${5:-2026-07-28}" = 2026-07-28 ]; then
    h+=(-H "Mcp-Method: $2")
    [ -n "$3" ] && h+=(-H "Mcp-Name: $3")
  fi
  curl -sS -X POST "$1" "${h[@]}" --data-binary "$4"
}

# One finished task to ask about (the fake Ollama completes it at once).
RUN_BODY="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"agent_run\",\"arguments\":{\"request\":\"benchmark task\"},$META}}"
TASK_ID="$(post "$AGENT_URL" tools/call agent_run "$RUN_BODY" | python3 -c 'import json,re,sys
t = json.load(sys.stdin)["result"]["content"][0]["text"]
print(re.search(r"task_id: (\S+)", t).group(1))')"
STATUS_BODY="{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"agent_status\",\"arguments\":{\"task_id\":\"$TASK_ID\"},$META}}"
LIST_BODY="{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\",\"params\":{$META}}"
# The same agent_status from a 2025-06-18 client: no _meta, only the version header; and for an
# id no server has (a purged task's, another instance's, a typo's: the not-found answer).
STATUS25_BODY="{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"agent_status\",\"arguments\":{\"task_id\":\"$TASK_ID\"}}}"
UNKNOWN_ID=7b3c1f4e-1111-4222-8333-944455556666
UNKNOWN_BODY="{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"agent_status\",\"arguments\":{\"task_id\":\"$UNKNOWN_ID\"}}}"
for _ in $(seq 1 100); do
  post "$AGENT_URL" tools/call agent_status "$STATUS_BODY" > "$WORK/status.json"
  grep -q 'status: completed' "$WORK/status.json" && break
  sleep 0.1
done
grep -q 'status: completed' "$WORK/status.json" || { echo "the benchmark task did not complete" >&2; cat "$WORK/status.json" >&2; exit 1; }
post "$AGENT_URL" tools/list "" "$LIST_BODY" > "$WORK/list.json"

start_url_printer rmcp "$RMCP_PEER" --bench "$TASK_ID"; RMCP_URL="$URL"
start_url_printer hyper_status "$HYPER_PEER" --bench "$WORK/status.json"; HYPER_STATUS_URL="$URL"
start_url_printer hyper_list "$HYPER_PEER" --bench "$WORK/list.json"; HYPER_LIST_URL="$URL"
start_url_printer floor "$FLOOR_PEER" --bench "$TASK_ID"; FLOOR_URL="$URL"

# Every server must answer the load's request successfully before it is measured.
for u in "$AGENT_URL" "$RMCP_URL" "$FLOOR_URL"; do
  post "$u" tools/call agent_status "$STATUS_BODY" | grep -q 'status: completed' ||
    { echo "$u does not answer agent_status:" >&2; post "$u" tools/call agent_status "$STATUS_BODY" >&2; exit 1; }
  post "$u" tools/call agent_status "$STATUS25_BODY" 2025-06-18 | grep -q 'status: completed' ||
    { echo "$u does not answer a 2025-06-18 agent_status:" >&2; post "$u" tools/call agent_status "$STATUS25_BODY" 2025-06-18 >&2; exit 1; }
  post "$u" tools/call agent_status "$UNKNOWN_BODY" 2025-06-18 | grep -q "task_id: $UNKNOWN_ID" ||
    { echo "$u does not answer agent_status of an unknown id:" >&2; post "$u" tools/call agent_status "$UNKNOWN_BODY" 2025-06-18 >&2; exit 1; }
  [ "$u" = "$FLOOR_URL" ] && continue
  post "$u" tools/list "" "$LIST_BODY" | grep -q '"agent_run"' ||
    { echo "$u does not answer tools/list:" >&2; post "$u" tools/list "" "$LIST_BODY" >&2; exit 1; }
done

# wrk script per load (scripts/lib.sh).
wrk_lua tools/call agent_status "$STATUS_BODY" "$WORK/status.lua"
wrk_lua tools/call agent_status "$STATUS25_BODY" "$WORK/status25.lua" 2025-06-18
wrk_lua tools/call agent_status "$UNKNOWN_BODY" "$WORK/unknown.lua" 2025-06-18
wrk_lua tools/list "" "$LIST_BODY" "$WORK/list.lua"
wrk_lua tools/call agent_run "$RUN_BODY" "$WORK/run.lua"


echo "== load: $(uptime)"
echo "== $DURATION s per cell after $WARMUP s warm-up; servers on CPU ${PIN_SERVER[*]:-any}, wrk on ${PIN_CLIENT[*]:-any}"
declare -A R
if want status; then
# (bare hyper answers the modern status text for both status loads: it reads no request)
for load in status status25 unknown list; do
  for c in "${CONCURRENCY[@]}"; do
    if [ "$load" = list ]; then hyper="$HYPER_LIST_URL"; else hyper="$HYPER_STATUS_URL"; fi
    R[agent,$load,$c]="$(wrk_measure "$AGENT_URL" "$WORK/$load.lua" "$c")"
    R[rmcp,$load,$c]="$(wrk_measure "$RMCP_URL" "$WORK/$load.lua" "$c")"
    R[hyper,$load,$c]="$(wrk_measure "$hyper" "$WORK/$load.lua" "$c")"
    [ "$load" != list ] && R[floor,$load,$c]="$(wrk_measure "$FLOOR_URL" "$WORK/$load.lua" "$c")"
  done
done
fi
# agent_run accepted durably (answered after its commit, synchronous = FULL), c=16. The fake
# Ollama finishes each task at once, so the worker's own writes compete with the accepts, as
# they would in use. Only agent-mcp: the peers do not queue tasks.
want run && R[agent,run,16]="$(wrk_measure "$AGENT_URL" "$WORK/run.lua" 16)"
echo "== load after: $(uptime)"

load_name() {
  case "$1" in
    status) echo "tools/call agent_status" ;;
    status25) echo "tools/call agent_status (2025-06-18)" ;;
    unknown) echo "tools/call agent_status, unknown id (2025-06-18)" ;;
    list) echo "tools/list" ;;
  esac
}
fmt_lat() { awk -v us="$1" 'BEGIN { if (us >= 1000) printf "%.2f ms", us/1000; else printf "%d µs", us }'; }
verdicts=()
want status && echo && echo "| load | conc | agent-mcp req/s | p50 / p99 | rmcp req/s | p50 / p99 | hyper req/s | p50 / p99 | agent-mcp/rmcp | agent-mcp/hyper |" &&
  echo "|---|---:|---:|---|---:|---|---:|---|---:|---:|"
want status && for load in status status25 unknown list; do
  name="$(load_name "$load")"
  for c in "${CONCURRENCY[@]}"; do
    read -r a_rps a50 a99 aerr <<< "${R[agent,$load,$c]}"
    read -r r_rps r50 r99 rerr <<< "${R[rmcp,$load,$c]}"
    read -r h_rps h50 h99 herr <<< "${R[hyper,$load,$c]}"
    vs_rmcp="$(awk -v a="$a_rps" -v b="$r_rps" 'BEGIN { printf "%.2f×", a/b }')"
    vs_hyper="$(awk -v a="$a_rps" -v b="$h_rps" 'BEGIN { printf "%.0f %%", 100*a/b }')"
    errs=""; [ "$aerr$rerr$herr" != "000" ] && errs=" (errors: $aerr/$rerr/$herr)"
    echo "| $name | $c | $a_rps | $(fmt_lat "$a50") / $(fmt_lat "$a99") | $r_rps | $(fmt_lat "$r50") / $(fmt_lat "$r99") | $h_rps | $(fmt_lat "$h50") / $(fmt_lat "$h99") | $vs_rmcp | $vs_hyper$errs |"
    if [ "$load" != list ] && [ "$c" != 1 ]; then
      ok="$(awk -v a="$a_rps" -v b="$r_rps" 'BEGIN { print (a >= 1.5*b) ? "met" : "MISSED" }')"
      verdicts+=("$name c=$c: agent-mcp ≥ 1.5× rmcp req/s — $ok ($vs_rmcp)")
    fi
    if [ "$load" = status ] && [ "$c" = 16 ]; then
      ok="$(awk -v p="$a99" 'BEGIN { print (p <= 2000) ? "met" : "MISSED" }')"
      verdicts+=("agent_status c=16: agent-mcp p99 ≤ 2 ms — $ok ($(fmt_lat "$a99"))")
    fi
  done
done
want status && echo && echo "| load | conc | floor req/s | p50 / p99 | floor/hyper | agent-mcp/floor |" &&
  echo "|---|---:|---:|---|---:|---:|" &&
  for load in status status25 unknown; do
  name="$(load_name "$load")"
  for c in "${CONCURRENCY[@]}"; do
    read -r a_rps _ _ _ <<< "${R[agent,$load,$c]}"
    read -r h_rps _ _ _ <<< "${R[hyper,$load,$c]}"
    read -r f_rps f50 f99 ferr <<< "${R[floor,$load,$c]}"
    errs=""; [ "$ferr" != 0 ] && errs=" (errors: $ferr)"
    vs_floor="$(awk -v a="$a_rps" -v b="$f_rps" 'BEGIN { printf "%.0f %%", 100*a/b }')"
    echo "| $name | $c | $f_rps | $(fmt_lat "$f50") / $(fmt_lat "$f99") | $(awk -v a="$f_rps" -v b="$h_rps" 'BEGIN { printf "%.0f %%", 100*a/b }') | $vs_floor$errs |"
    if [ "$c" = 64 ]; then
      ok="$(awk -v a="$a_rps" -v b="$f_rps" 'BEGIN { print (a >= 0.7*b) ? "met" : "MISSED" }')"
      verdicts+=("$name c=64: agent-mcp ≥ 70 % of the floor peer's req/s — $ok ($vs_floor)")
    fi
  done
  done
if want run; then
read -r run_rps run50 run99 runerr <<< "${R[agent,run,16]}"
echo
echo "| load | conc | agent-mcp req/s | p50 / p99 | errors |"
echo "|---|---:|---:|---|---:|"
echo "| tools/call agent_run (durable accept) | 16 | $run_rps | $(fmt_lat "$run50") / $(fmt_lat "$run99") | $runerr |"
# Before group commit, one fsync per accepted task: about 1,060 accepts/s on this machine.
ok="$(awk -v a="$run_rps" 'BEGIN { print (a >= 5*1060) ? "met" : "MISSED" }')"
verdicts+=("agent_run c=16: ≥ 5 × 1,060 durable accepts/s — $ok ($run_rps/s)")
fi
echo
if want queue; then
# Queue depth: a second agent-mcp (same configuration) whose fake Ollama never answers, so the
# first task runs forever and every later one waits. agent_status of a task at the back of
# QUEUED waiting tasks vs of the running task with nobody waiting, and the server's RSS.
QUEUED="${QUEUED:-100000}"
echo "== queue depth: agent_status with $QUEUED tasks queued vs none"
BUSY_OLLAMA_URL="$OLLAMA_URL"
start_fake_ollama "$FAKE" fake_hang FAKE_OLLAMA_REPLY=hang FAKE_OLLAMA_MODEL=qwen3:8b
Q_PORT="$(free_port)"
Q_URL="http://127.0.0.1:$Q_PORT/mcp"
mkdir -p "$WORK/q"
serve_default_agent_mcp "$WORK/q" "$WORK/q/server.log" "$Q_URL" "$Q_PORT"
Q_PID="${PIDS[-1]}"
OLLAMA_URL="$BUSY_OLLAMA_URL"
task_of() { python3 -c 'import json,re,sys
t = json.load(sys.stdin)["result"]["content"][0]["text"]
print(re.search(r"task_id: (\S+)", t).group(1))'; }
status_lua_of() { # task_id file
  wrk_lua tools/call agent_status "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"agent_status\",\"arguments\":{\"task_id\":\"$1\"},$META}}" "$2"
}
FIRST="$(post "$Q_URL" tools/call agent_run "$RUN_BODY" | task_of)"
status_lua_of "$FIRST" "$WORK/q/first.lua"
# Waits until the server is idle (under 5 ms of CPU in 0.5 s, at most 60 s), and says how
# long that took and what the SQLite writer thread spent meanwhile: after a burst of accepts
# it checkpoints the WAL into the database, work of the burst, not of the queue's depth.
cpu_ms() { awk '{print ($14 + $15) * 10}' "$1" 2>/dev/null || echo 0; }
writer_stat() { grep -l '^agent-mcp-write' /proc/"$Q_PID"/task/*/comm 2>/dev/null | head -1 | sed 's/comm$/stat/'; }
settle() {
  local w; w="$(writer_stat)"
  local t0 w0 prev now
  t0="$(date +%s.%N)"; w0="$(cpu_ms "$w")"; prev="$(cpu_ms /proc/$Q_PID/stat)"
  for _ in $(seq 1 120); do
    sleep 0.5
    now="$(cpu_ms /proc/$Q_PID/stat)"
    [ $((now - prev)) -lt 5 ] && break
    prev="$now"
  done
  echo "settled in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }'), SQLite writer thread CPU meanwhile $(( $(cpu_ms "$w") - w0 )) ms"
}
echo "before the empty-queue cell: $(settle)"
R[q,0]="$(wrk_measure "$Q_URL" "$WORK/q/first.lua" 64)"
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$Q_PID/status" 2>/dev/null || echo 0; }
RSS0="$(rss_kib)"
# Fill the queue with agent_run from wrk until QUEUED tasks wait behind the running one.
depth=0
while [ "$depth" -lt "$QUEUED" ]; do
  "${PIN_CLIENT[@]}" wrk -t1 -c32 -d3s -s "$WORK/run.lua" "$Q_URL" > /dev/null 2>&1 || true
  LAST="$(post "$Q_URL" tools/call agent_run "$RUN_BODY" | task_of)"
  depth="$(post "$Q_URL" tools/call agent_status "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"agent_status\",\"arguments\":{\"task_id\":\"$LAST\"},$META}}" |
    python3 -c 'import json,re,sys
t = json.load(sys.stdin)["result"]["content"][0]["text"]
m = re.search(r"待ち順: (\d+)", t)
print(m.group(1) if m else 0)')"
done
status_lua_of "$LAST" "$WORK/q/last.lua"
echo "before the deep-queue cell: $(settle)"
R[q,n]="$(wrk_measure "$Q_URL" "$WORK/q/last.lua" 64)"
RSSN="$(rss_kib)"
read -r q0_rps q0_50 q0_99 q0_err <<< "${R[q,0]}"
read -r qn_rps qn_50 qn_99 qn_err <<< "${R[q,n]}"
echo
echo "| agent_status, c=64 | queued | req/s | p50 / p99 | server RSS |"
echo "|---|---:|---:|---|---:|"
echo "| the running task | 0 | $q0_rps | $(fmt_lat "$q0_50") / $(fmt_lat "$q0_99") | $((RSS0 / 1024)) MiB |"
echo "| the last queued task | $depth | $qn_rps | $(fmt_lat "$qn_50") / $(fmt_lat "$qn_99") | $((RSSN / 1024)) MiB |"
ok="$(awk -v a="$qn_rps" -v b="$q0_rps" 'BEGIN { print (a >= 0.9*b) ? "met" : "MISSED" }')"
verdicts+=("agent_status with $depth queued ≥ 90 % of the empty queue's req/s — $ok ($(awk -v a="$qn_rps" -v b="$q0_rps" 'BEGIN { printf "%.0f %%", 100*a/b }'))")
ok="$(awk -v a="$qn_99" -v b="$q0_99" 'BEGIN { print (a <= 1.5*b) ? "met" : "MISSED" }')"
verdicts+=("agent_status p99 with $depth queued ≤ 1.5× the empty queue's — $ok ($(fmt_lat "$qn_99") vs $(fmt_lat "$q0_99"))")
ok="$(awk -v r="$RSSN" 'BEGIN { print (r <= 100*1024) ? "met" : "MISSED" }')"
verdicts+=("server RSS with $depth queued ≤ 100 MiB — $ok ($((RSSN / 1024)) MiB)")
fi
echo
if want images; then
echo "== agent_run with 4 x 5 MiB images to durable acceptance (SQLite, FULL) vs its floor"
"${PIN_SERVER[@]}" "$ACCEPT" --bench | tee "$WORK/accept.txt"
ratio="$(awk '/^ratio/ {print $2}' "$WORK/accept.txt")"
if [ -n "$ratio" ]; then
  ok="$(awk -v r="$ratio" 'BEGIN { print (r <= 1.5) ? "met" : "MISSED" }')"
  verdicts+=("20 MiB agent_run accepted in ≤ 1.5× its floor (transfer + parse + decode/hash + write/fdatasync) — $ok (${ratio}×)")
fi
fi
echo
echo "== targets"
for v in "${verdicts[@]}"; do echo "- $v"; done
