#!/usr/bin/env bash
# Push vs poll: what following a task by `subscriptions/listen` saves, and what a stalled
# subscriber costs. Drives the real `agent-mcp serve` beside the fake Ollama on 127.0.0.1.
#
#  1. Requests per finished task: TASKS tasks (each one model call of REPLY_MS ms), followed
#     one at a time (a) by polling `tasks/get` at the pollIntervalMs the server suggests, and
#     (b) by one `subscriptions/listen`. Counted by the client and, independently, by the
#     server's `agent_mcp_requests_total` on /metrics.
#  2. A stalled subscriber: a task whose step calls a tool ROUNDS times (two progress changes a
#     round: the model call and the tool); one subscriber reads along, another sends its listen
#     and then reads nothing for STALL_S seconds (a 4 KiB receive buffer). Run beside a control
#     without the stalled one; prints the server's RSS, how long `tools/list` takes meanwhile,
#     and what the stalled one gets when it reads again.
#
# Usage: scripts/bench-push.sh            (debug build; PROFILE=release for the release one)
#        TASKS=5 REPLY_MS=3000 ROUNDS=1000 STALL_S=30 scripts/bench-push.sh
# Wall-clock figures: run it on an otherwise quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

TASKS="${TASKS:-5}"
REPLY_MS="${REPLY_MS:-3000}"
ROUNDS="${ROUNDS:-1000}"
STALL_S="${STALL_S:-30}"
PROFILE="${PROFILE:-debug}"
if [ "$PROFILE" = release ]; then
  cargo build --release --locked --quiet --bin agent-mcp
  FAKE="$(bash scripts/bench-exe.sh fake_ollama --release)"
else
  cargo build --locked --quiet --bin agent-mcp
  FAKE="$(bash scripts/bench-exe.sh fake_ollama)"
fi
TARGET="${CARGO_TARGET_DIR:-$PWD/target}/$PROFILE"
BIN="$TARGET/agent-mcp"

# start_server NAME OLLAMA_URL [extra yaml]: agent-mcp serve with its own folder; sets
# SERVER_URL and SERVER_PID.
start_server() {
  local name="$1" ollama="$2" extra="${3:-}" port
  port="$(free_port)"
  mkdir -p "$WORK/$name/ws"
  cat > "$WORK/$name/agent.yaml" <<YAML
ollama:
  url: $ollama
  model: test-model
http:
  bind: 127.0.0.1:$port
audit:
  enabled: false
store:
  backend: memory
$extra
YAML
  (cd "$WORK/$name" && RUST_LOG=warn exec "${PIN_SERVER[@]}" "$BIN" serve --config "$WORK/$name/agent.yaml") 2> "$WORK/$name/server.log" &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  SERVER_URL="http://127.0.0.1:$port/mcp"
  for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$port/healthz" && return; sleep 0.1; done
  echo "agent-mcp ($name) did not start" >&2; cat "$WORK/$name/server.log" >&2; exit 1
}

echo "== agent-mcp push vs poll ($PROFILE build; $(nproc) cores)"

# --- 1. requests per finished task ----------------------------------------------------------
start_fake_ollama "$FAKE" fake1 FAKE_OLLAMA_REPLY_DELAY_MS="$REPLY_MS"
start_server counts "$OLLAMA_URL"
"${PIN_CLIENT[@]}" python3 - "$SERVER_URL" "$TASKS" <<'PY'
import http.client, json, sys, time, urllib.parse, urllib.request
url, tasks = sys.argv[1], int(sys.argv[2])
u = urllib.parse.urlparse(url)
EXT = "io.modelcontextprotocol/tasks"
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "bench-push", "version": "1"}}
sent = 0
def post(method, params, name=None):
    global sent
    sent += 1
    body = json.dumps({"jsonrpc": "2.0", "id": sent, "method": method,
                       "params": dict(params, _meta=META)}).encode()
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
         "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
    if name: h["Mcp-Name"] = name
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    conn.request("POST", u.path, body, h)
    return conn, conn.getresponse()
def call(method, params, name=None):
    conn, r = post(method, params, name)
    v = json.loads(r.read()); conn.close()
    return v["result"]
def metrics():
    text = urllib.request.urlopen(f"http://{u.hostname}:{u.port}/metrics").read().decode()
    return sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
               if l.startswith("agent_mcp_requests_total{"))
def create():
    r = call("tools/call", {"name": "agent_run", "arguments": {"request": "bench"}}, "agent_run")
    assert r["resultType"] == "task", r
    return r
rows = []
for mode in ("poll", "push"):
    global_sent0, server0, t0 = sent, metrics(), time.time()
    notes = 0
    for _ in range(tasks):
        task = create()
        tid = task["taskId"]
        if mode == "poll":
            while task["status"] == "working":
                time.sleep(task.get("pollIntervalMs", 1000) / 1000)
                task = call("tasks/get", {"taskId": tid}, tid)
        else:
            conn, r = post("subscriptions/listen", {"notifications": {"taskIds": [tid]}})
            assert r.getheader("Content-Type", "").startswith("text/event-stream"), r.status
            last = None
            for line in r:
                line = line.decode().strip()
                if line.startswith("data: "):
                    m = json.loads(line[6:])
                    if m.get("method") == "notifications/tasks":
                        notes += 1; last = m["params"]
            conn.close()
            assert last and last["status"] == "completed" and "result" in last, last
    time.sleep(0.3)  # the metrics layer records after answering
    client = sent - global_sent0
    server = metrics() - server0
    rows.append((mode, tasks, client, int(server), client / tasks, time.time() - t0, notes))
print("| mode | tasks | requests (client) | requests (server /metrics) | requests per finished task | wall s | notifications |")
print("|---|---|---|---|---|---|---|")
for m, t, c, s, per, wall, notes in rows:
    print(f"| {m} | {t} | {c} | {s} | {per:.1f} | {wall:.1f} | {notes if m == 'push' else '-'} |")
PY

# --- 2. a stalled subscriber ------------------------------------------------------------------
# Twice on fresh servers: a reading subscriber alone (the control), then the same with a
# stalled one beside it; the difference in the server's RSS is what the stalled one costs.
stall_run() { # label stalled(0|1)
  start_fake_ollama "$FAKE" "fake-$1" FAKE_OLLAMA_TOOL_ROUNDS="$ROUNDS"
  start_server "stall-$1" "$OLLAMA_URL" "agent:
  max_iterations: $((ROUNDS + 10))
  workspace: $WORK/stall-$1/ws"
  "${PIN_CLIENT[@]}" python3 - "$SERVER_URL" "$SERVER_PID" "$STALL_S" "$2" "$1" <<'PY'
import http.client, json, socket, sys, threading, time, urllib.parse
url, pid, stall_s, with_stalled, label = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "1", sys.argv[5]
u = urllib.parse.urlparse(url)
EXT = "io.modelcontextprotocol/tasks"
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}}
def rss_kib():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
def body_of(method, params, id_):
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": dict(params, _meta=META)}).encode()
def headers(method, name=None):
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
         "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
    if name: h["Mcp-Name"] = name
    return h
def call(method, params, name=None):
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    conn.request("POST", u.path, body_of(method, params, 1), headers(method, name))
    v = json.loads(conn.getresponse().read()); conn.close()
    return v
base_rss = rss_kib()
tid = call("tools/call", {"name": "agent_run", "arguments": {"request": "look around"}}, "agent_run")["result"]["taskId"]
listen = {"notifications": {"taskIds": [tid]}}
stalled = None
if with_stalled:
    # Small receive buffer, sends its listen, then reads nothing for stall_s.
    stalled = socket.socket()
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.connect((u.hostname, u.port))
    body = body_of("subscriptions/listen", listen, 2)
    head = f"POST {u.path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in headers("subscriptions/listen").items())
    stalled.sendall((head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
seen = {"n": 0, "last": None}
def reader():
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    conn.request("POST", u.path, body_of("subscriptions/listen", listen, 3), headers("subscriptions/listen"))
    for line in conn.getresponse():
        line = line.decode().strip()
        if line.startswith("data: "):
            m = json.loads(line[6:])
            if m.get("method") == "notifications/tasks":
                seen["n"] += 1; seen["last"] = m["params"]; seen["done_at"] = time.time()
t0 = time.time()
th = threading.Thread(target=reader, daemon=True); th.start()
rss, lat = [], []
while time.time() - t0 < stall_s:
    rss.append(rss_kib())
    s = time.time(); call("tools/list", {}); lat.append((time.time() - s) * 1000)
    time.sleep(1)
th.join(timeout=600)
last = seen["last"] or {}
ok = last.get("status") == "completed" and last.get("result", {}).get("isError") is False
row = {"label": label, "base": base_rss, "max": max(rss), "lat_max": max(lat),
       "lat_med": sorted(lat)[len(lat) // 2], "reader": seen["n"], "done": seen.get("done_at", t0) - t0, "ok": ok}
if stalled is not None:
    row["after_stall"] = rss_kib()
    stalled.settimeout(60)
    raw = b""
    while not raw.endswith(b"\r\n0\r\n\r\n"):
        chunk = stalled.recv(65536)
        if not chunk: break
        raw += chunk
    datas = [json.loads(l[6:]) for l in raw.decode(errors="replace").splitlines() if l.startswith("data: ")]
    updates = [m["params"] for m in datas if m.get("method") == "notifications/tasks"]
    sl = updates[-1] if updates else {}
    row["stalled"] = len(updates)
    row["stalled_ok"] = sl.get("status") == "completed" and sl.get("result", {}).get("isError") is False
    row["ended"] = bool(datas) and datas[-1].get("result", {}).get("resultType") == "complete"
print(json.dumps(row))
assert ok, f"the task did not complete: {last.get('status')} {last.get('statusMessage')}"
PY
}
stall_run control 0 > "$WORK/control.json"
stall_run stalled 1 > "$WORK/stalled.json"
python3 - "$WORK/control.json" "$WORK/stalled.json" "$STALL_S" "$ROUNDS" <<'PY'
import json, sys
c = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
s = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
stall_s, rounds = sys.argv[3], sys.argv[4]
mib = lambda k: f"{k/1024:.1f} MiB"
print()
print(f"stall: a task whose step calls a tool {rounds} times; {stall_s} s measured")
print("| figure | reader only (control) | reader + stalled subscriber |")
print("|---|---|---|")
print(f"| server RSS before the task | {mib(c['base'])} | {mib(s['base'])} |")
print(f"| server RSS, max over the {stall_s} s | {mib(c['max'])} | {mib(s['max'])} |")
print(f"| server RSS after the stalled subscriber read | - | {mib(s['after_stall'])} |")
print(f"| tools/list meanwhile, max / median | {c['lat_max']:.1f} / {c['lat_med']:.1f} ms | {s['lat_max']:.1f} / {s['lat_med']:.1f} ms |")
print(f"| task notifications the reader got (task done at) | {c['reader']} ({c['done']:.1f} s) | {s['reader']} ({s['done']:.1f} s) |")
print(f"| task notifications the stalled subscriber got on resume | - | {s['stalled']} |")
print(f"| its last one: completed with the result | - | {s['stalled_ok']} |")
print(f"| its stream ended with the listen's result | - | {s['ended']} |")
assert s["stalled_ok"] and s["ended"], "the stalled subscriber did not get the latest state"
PY
