#!/usr/bin/env bash
# Push vs poll: what following a task by `subscriptions/listen` saves, and what a stalled
# subscriber costs. Drives the real `agent-mcp serve` beside the fake Ollama on 127.0.0.1.
#
#  1. Requests per finished task: TASKS tasks (each one model call of REPLY_MS ms), followed
#     one at a time (a) by polling `tasks/get` at the pollIntervalMs the server suggests, and
#     (b) by one `subscriptions/listen`. Counted by the client and, independently, by the
#     server's `agent_mcp_requests_total` on /metrics.
#  2. A stalled subscriber: a task whose step calls a tool ROUNDS times (about 1,000 progress
#     changes); one subscriber reads along, another sends its listen and then reads nothing for
#     STALL_S seconds (a 4 KiB receive buffer). Prints the server's RSS over the stall, how long
#     `tools/list` takes meanwhile, and what the stalled one gets when it reads again.
#
# Usage: scripts/bench-push.sh            (debug build; PROFILE=release for the release one)
#        TASKS=5 REPLY_MS=3000 ROUNDS=700 STALL_S=30 scripts/bench-push.sh
# Wall-clock figures: run it on an otherwise quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

TASKS="${TASKS:-5}"
REPLY_MS="${REPLY_MS:-3000}"
ROUNDS="${ROUNDS:-700}"
STALL_S="${STALL_S:-30}"
PROFILE="${PROFILE:-debug}"
if [ "$PROFILE" = release ]; then
  cargo build --release --locked --quiet --bin agent-mcp --example fake_ollama
else
  cargo build --locked --quiet --bin agent-mcp --example fake_ollama
fi
TARGET="${CARGO_TARGET_DIR:-$PWD/target}/$PROFILE"
BIN="$TARGET/agent-mcp"
FAKE="$TARGET/examples/fake_ollama"

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
start_fake_ollama "$FAKE" fake2 FAKE_OLLAMA_TOOL_ROUNDS="$ROUNDS"
start_server stall "$OLLAMA_URL" "agent:
  max_iterations: $((ROUNDS + 10))
  workspace: $WORK/stall/ws"
"${PIN_CLIENT[@]}" python3 - "$SERVER_URL" "$SERVER_PID" "$STALL_S" <<'PY'
import http.client, json, socket, sys, threading, time, urllib.parse
url, pid, stall_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
u = urllib.parse.urlparse(url)
EXT = "io.modelcontextprotocol/tasks"
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}}
def rss_kib():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
def request_bytes(method, params, id_=1, name=None):
    body = json.dumps({"jsonrpc": "2.0", "id": id_, "method": method,
                       "params": dict(params, _meta=META)})
    head = (f"POST {u.path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\n"
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            f"MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\n")
    if name: head += f"Mcp-Name: {name}\r\n"
    return (head + f"Content-Length: {len(body.encode())}\r\n\r\n" + body).encode()
def call(method, params, name=None):
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    body = request_bytes(method, params, name=name).split(b"\r\n\r\n", 1)[1]
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
         "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
    if name: h["Mcp-Name"] = name
    conn.request("POST", u.path, body, h)
    v = json.loads(conn.getresponse().read()); conn.close()
    return v
base_rss = rss_kib()
task = call("tools/call", {"name": "agent_run", "arguments": {"request": "look around"}}, "agent_run")["result"]
tid = task["taskId"]
listen = {"notifications": {"taskIds": [tid]}}
# The stalled subscriber: small receive buffer, sends its listen, reads nothing for stall_s.
stalled = socket.socket()
stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
stalled.connect((u.hostname, u.port))
stalled.sendall(request_bytes("subscriptions/listen", listen, id_=2))
# The reader: follows along and counts.
seen = {"n": 0, "last": None}
def reader():
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    body = request_bytes("subscriptions/listen", listen, id_=3).split(b"\r\n\r\n", 1)[1]
    conn.request("POST", u.path, body, {"Content-Type": "application/json",
        "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "subscriptions/listen"})
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
during_max = max(rss)
# The stalled subscriber reads again.
stalled.settimeout(60)
raw = b""
while not raw.endswith(b"\r\n0\r\n\r\n"):
    chunk = stalled.recv(65536)
    if not chunk: break
    raw += chunk
datas = [json.loads(l[6:]) for l in raw.decode(errors="replace").splitlines() if l.startswith("data: ")]
updates = [m["params"] for m in datas if m.get("method") == "notifications/tasks"]
after_rss = rss_kib()
last = updates[-1] if updates else {}
print()
print(f"stall: {stall_s:.0f} s without reading, task with {seen['n']} task notifications seen by the reading subscriber"
      f" (finished {seen.get('done_at', t0) - t0:.1f} s into the stall)")
print("| figure | value |")
print("|---|---|")
print(f"| server RSS before the task | {base_rss/1024:.1f} MiB |")
print(f"| server RSS during the stall, max of {len(rss)} samples | {during_max/1024:.1f} MiB |")
print(f"| server RSS after the stalled subscriber read | {after_rss/1024:.1f} MiB |")
print(f"| tools/list during the stall, max / median | {max(lat):.1f} / {sorted(lat)[len(lat)//2]:.1f} ms |")
print(f"| updates the reader got | {seen['n']} |")
print(f"| updates the stalled subscriber got on resume | {len(updates)} |")
print(f"| its last update | {last.get('status')} with result: {'result' in last} |")
print(f"| its stream ended with the listen's result | {bool(datas) and datas[-1].get('result', {}).get('resultType') == 'complete'} |")
assert last.get("status") == "completed" and "result" in last, "the stalled subscriber did not get the latest state"
PY
