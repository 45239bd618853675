#!/usr/bin/env python3
"""Probes a built agent-mcp the way issue 27 did, point by point, and prints one figure each.

    python3 scripts/hostile.py [POINT ...]     # all points, or e.g. `memory fds audit`

AGENT_MCP_BIN (default target/release/agent-mcp) and FAKE_OLLAMA_BIN (default: the release
build of the bench target fake_ollama, built by scripts/bench-exe.sh) pick the builds; every run is the real binary on
127.0.0.1 with a fake Ollama, in a fresh temporary folder, on the default configuration
unless the point says otherwise. The figures are what the closing note's before/after table
quotes; the tests in tests/hostile_*.rs hold the bounds.
"""

import hashlib
import http.client
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.abspath(os.environ.get("AGENT_MCP_BIN", os.path.join(ROOT, "target/release/agent-mcp")))
FAKE = os.path.abspath(
    os.environ.get("FAKE_OLLAMA_BIN")
    or subprocess.run(
        ["bash", os.path.join(ROOT, "scripts/bench-exe.sh"), "fake_ollama", "--release"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
)
MODERN = "2026-07-28"
TOKEN = "hostile-probe-token"
TOKEN_SHA = hashlib.sha256(TOKEN.encode()).hexdigest()
SECRET = "PW-s3cret-27"
# The default body cap: 4/3 of 20 MiB of images plus 1 MiB.
BODY_CAP = -(-20 * 1024 * 1024 // 3) * 4 + 1024 * 1024

# The children get this environment without the two variables that pick the builds
# (`AGENT_MCP_BIN` would otherwise be warned about as an unknown configuration override).
BASE_ENV = {k: v for k, v in os.environ.items() if k not in ("AGENT_MCP_BIN", "FAKE_OLLAMA_BIN")}

resource.setrlimit(resource.RLIMIT_NOFILE, (min(20000, resource.getrlimit(resource.RLIMIT_NOFILE)[1]),) * 2)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Fake:
    def __init__(self, **env):
        e = dict(BASE_ENV)
        e.update({k: str(v) for k, v in env.items()})
        self.proc = subprocess.Popen([FAKE], stdout=subprocess.PIPE, env=e)
        self.url = self.proc.stdout.readline().decode().strip()
        # What a server needs to talk to this fake.
        self.env = {"OLLAMA_HOST": self.url, "AGENT_MCP_OLLAMA_MODEL": "test-model"}

    def stop(self):
        self.proc.kill()
        self.proc.wait()


class Server:
    """`agent-mcp serve` in a temporary folder, on a port of our choosing."""

    def __init__(self, config="", env=None, prefix=(), stderr="read", bind="127.0.0.1", args=(), wait=True):
        self.dir = tempfile.mkdtemp(prefix="hostile-")
        self.ws = os.path.join(self.dir, "ws")
        os.makedirs(self.ws)
        self.cfg = os.path.join(self.dir, "agent.yaml")
        with open(self.cfg, "w") as f:
            f.write(config)
        self.port = free_port()
        self.host = bind
        e = dict(BASE_ENV)
        e.update({"XDG_STATE_HOME": os.path.join(self.dir, "state"), "RUST_LOG": "info"})
        e.update(env or {})
        self.lines = []
        out = {"read": subprocess.PIPE, "unread": subprocess.PIPE, "closed": subprocess.PIPE}[stderr]
        self.proc = subprocess.Popen(
            list(prefix) + [BIN, "serve", "--bind", f"{bind}:{self.port}", "--config", self.cfg] + list(args),
            cwd=self.ws, env=e, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=out)
        if stderr == "read":
            threading.Thread(target=self._read, daemon=True).start()
        elif stderr == "closed":
            self.proc.stderr.close()
        if wait:
            self.wait_up()

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append(line.decode(errors="replace"))

    def wait_up(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}: {''.join(self.lines)[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("server did not listen")

    def rss_mib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
        return self.proc.returncode


def mcp_body(method, params, id_=1, meta=True):
    params = dict(params)
    if meta:
        params["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                           "io.modelcontextprotocol/clientCapabilities": {}}
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params})


def mcp_headers(method, name=None, token=None):
    h = {"Content-Type": "application/json", "MCP-Protocol-Version": MODERN, "Mcp-Method": method,
         "Accept": "application/json, text/event-stream"}
    if name:
        h["Mcp-Name"] = name
    if token:
        h["Authorization"] = f"Bearer {token}"
    return h


def call(port, method, params, token=None, id_=1, timeout=20, source=None, host="127.0.0.1"):
    name = params.get("name") or params.get("taskId")
    conn = http.client.HTTPConnection(host, port, timeout=timeout, source_address=source)
    try:
        conn.request("POST", "/mcp", mcp_body(method, params, id_), mcp_headers(method, name, token))
        r = conn.getresponse()
        text = r.read().decode(errors="replace")
        return r.status, text
    finally:
        conn.close()


def tool(port, name, args, **kw):
    status, text = call(port, "tools/call", {"name": name, "arguments": args}, **kw)
    try:
        body = json.loads(text)
    except ValueError:
        return status, None, text
    res = body.get("result") or {}
    content = (res.get("content") or [{}])[0].get("text", "")
    return status, res.get("isError"), content or text


def field(text, key):
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return line[len(key) + 1:].strip()
    return None


def run_task(port, request="Probe.", token=None, timeout=30):
    status, err, text = tool(port, "agent_run", {"request": request}, token=token)
    task = field(text, "task_id")
    if not task:
        return None, text
    deadline = time.time() + timeout
    while time.time() < deadline:
        _, _, s = tool(port, "agent_status", {"task_id": task}, token=token)
        if field(s, "status") in ("completed", "failed", "cancelled"):
            return field(s, "status"), s
        time.sleep(0.1)
    return "stuck (" + str(field(s, "status")) + ")", s


def task_after(port, timeout=20):
    """The state a task submitted now ends in, or why the server gave no answer."""
    try:
        state, _ = run_task(port, timeout=timeout)
    except OSError as e:
        state = f"no answer ({e.__class__.__name__})"
    return state


def get(port, path, headers=None, timeout=10):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers=headers or {})
        r = conn.getresponse()
        return r.status, r.read().decode(errors="replace")
    finally:
        conn.close()


def hold_body(port, size, headers, sent, stop):
    """Sends headers and `size` bytes of body (never the last byte), then holds the connection."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(5)
    head = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    s.sendall((head + f"Content-Length: {size + 1}\r\n\r\n").encode())
    chunk = b"x" * (1 << 20)
    left = size
    try:
        while left > 0 and not stop.is_set():
            n = s.send(chunk[:min(left, len(chunk))])
            left -= n
            sent.append(n)
    except OSError:
        pass
    stop.wait()
    s.close()


def refusal_latency(port, headers):
    """Seconds from a token-less request's headers (body never sent) to the first answer byte."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(40)
    head = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    t = time.time()
    s.sendall((head + "Content-Length: 4096\r\n\r\n").encode())
    try:
        first = s.recv(64)
    except OSError:
        first = b""
    took = time.time() - t
    s.close()
    return took, first.split(b"\r\n")[0].decode(errors="replace")


def memory():
    fake = Fake()
    for label, config in [("tokens set, none sent", f"auth:\n  tokens: [{{name: ci, sha256: {TOKEN_SHA}}}]\n"),
                          ("no tokens (default)", "")]:
        srv = Server(config, fake.env)
        stop, sent = threading.Event(), []
        threads = [threading.Thread(target=hold_body, args=(srv.port, BODY_CAP - 1, mcp_headers("tools/list"), sent, stop), daemon=True) for _ in range(40)]
        for t in threads:
            t.start()
        time.sleep(12)
        rss, peak = srv.rss_mib()
        took, line = refusal_latency(srv.port, mcp_headers("tools/list"))
        stop.set()
        print(f"memory [{label}]: 40 held near-cap bodies ({sum(sent) / 2**20:.0f} MiB sent): RSS {rss:.0f} MiB, peak {peak:.0f} MiB; "
              f"a token-less request answered {took:.2f} s after its headers ({line})")
        srv.stop()
    fake.stop()


def fds():
    fake = Fake()
    for limit in ["1024:1024", "1024:4096"]:
        srv = Server("", fake.env, prefix=["prlimit", f"--nofile={limit}", "--"])
        idle = []
        for _ in range(1100):
            try:
                idle.append(socket.create_connection(("127.0.0.1", srv.port), timeout=2))
            except OSError:
                break
        time.sleep(1)
        t = time.time()
        try:
            status, _ = call(srv.port, "tools/list", {}, timeout=10)
            good = f"answered {status} in {time.time() - t:.2f} s"
        except OSError as e:
            good = f"not answered within 10 s ({e.__class__.__name__})"
        time.sleep(1)
        errors = sum("accept failed" in l for l in srv.lines)
        print(f"fds [nofile {limit}]: {len(idle)} idle connections open; a good client {good}; "
              f"'accept failed' log lines: {errors}")
        startup = [l.strip() for l in srv.lines if "serving MCP" in l or "descriptor" in l]
        if startup:
            print("   start-up:", startup[0][-300:])
        for s in idle:
            s.close()
        srv.stop()
    fake.stop()


def audit():
    fake = Fake()
    srv = Server(f"auth:\n  tokens: [{{name: ci, sha256: {TOKEN_SHA}}}]\naudit:\n  file: ../audit.jsonl\n", fake.env)
    path = os.path.join(srv.dir, "audit.jsonl")
    size = lambda: os.path.getsize(path) if os.path.exists(path) else 0
    t = time.time()
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=20)
    for i in range(5000):
        try:
            conn.request("POST", "/mcp", mcp_body("tools/list", {}, i), mcp_headers("tools/list"))
            conn.getresponse().read()
        except (OSError, http.client.HTTPException):
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=20)
    took = time.time() - t
    time.sleep(1.5)
    flood = size()
    print(f"audit: 5,000 token-less calls in {took:.1f} s grew the audit file by {flood / 1e6:.2f} MB")
    huge = "i" * (25 * 1024 * 1024)
    for token, label in [(None, "token-less"), (TOKEN, "with the token")]:
        before = size()
        for _ in range(16):
            body = json.dumps({"jsonrpc": "2.0", "id": huge, "method": "tools/call",
                               "params": {"name": "nope", "arguments": {}, "_meta": {
                                   "io.modelcontextprotocol/protocolVersion": MODERN,
                                   "io.modelcontextprotocol/clientCapabilities": {}}}})
            try:
                c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=20)
                c.request("POST", "/mcp", body, mcp_headers("tools/call", "nope", token))
                c.getresponse().read()
                c.close()
            except (OSError, http.client.HTTPException):
                pass
        time.sleep(1.5)
        print(f"audit: 16 requests with a 25 MiB id ({label}) grew the audit file by {(size() - before) / 1e6:.2f} MB")
    rotated = sorted(n for n in os.listdir(srv.dir) if n.startswith("audit.jsonl"))
    print(f"audit: files {rotated}")
    srv.stop()
    fake.stop()


def stderr():
    fake = Fake()
    env = fake.env
    # stdio, stderr a pipe nobody reads.
    d = tempfile.mkdtemp(prefix="hostile-")
    e = dict(BASE_ENV, XDG_STATE_HOME=os.path.join(d, "state"), RUST_LOG="info", **env)
    p = subprocess.Popen([BIN, "stdio"], cwd=d, env=e, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    def send(method, params, i):
        p.stdin.write((mcp_body(method, params, i) + "\n").encode())
        p.stdin.flush()
    def recv(timeout=20):
        import select
        r, _, _ = select.select([p.stdout], [], [], timeout)
        if not r:
            return None
        return json.loads(p.stdout.readline())
    answered = 0
    for i in range(2000):
        send("tools/call", {"name": "agent_status", "arguments": {"task_id": "00000000-0000-4000-8000-000000000000"}}, i)
        if recv(5) is not None:
            answered += 1
    send("tools/call", {"name": "agent_run", "arguments": {"request": "after the flood"}}, 5000)
    m = recv(10)
    task = field(((m or {}).get("result", {}).get("content") or [{}])[0].get("text", ""), "task_id") if m else None
    state = "no answer"
    deadline = time.time() + 20
    while task and time.time() < deadline:
        send("tools/call", {"name": "agent_status", "arguments": {"task_id": task}}, 6000)
        m = recv(5)
        if m is None:
            state = "no answer to agent_status"
            break
        state = field(m["result"]["content"][0]["text"], "status")
        if state in ("completed", "failed"):
            break
        time.sleep(0.2)
    print(f"stderr [stdio, pipe unread]: {answered}/2000 audited calls answered; a task submitted after them: {state}")
    p.kill()
    p.wait()
    shutil.rmtree(d, ignore_errors=True)
    # HTTP, stderr a pipe nobody reads.
    srv = Server("", env, stderr="unread")
    for i in range(2000):
        try:
            tool(srv.port, "agent_status", {"task_id": "00000000-0000-4000-8000-000000000000"}, timeout=5)
        except OSError:
            break
    state = task_after(srv.port)
    print(f"stderr [http, pipe unread]: a task submitted after 2,000 audited calls: {state}")
    srv.proc.kill()
    srv.stop()
    # HTTP, stderr closed.
    srv = Server("", env, stderr="closed")
    ok = 0
    for i in range(200):
        try:
            s, _, _ = tool(srv.port, "agent_status", {"task_id": "00000000-0000-4000-8000-000000000000"}, timeout=5)
            ok += s == 200
        except OSError:
            pass
    state = task_after(srv.port)
    code = srv.stop()
    print(f"stderr [http, closed]: {ok}/200 calls answered; a task: {state}; exit code on SIGTERM: {code}")
    fake.stop()


def vcs():
    calls = [
        [["write_file", {"path": ".git/config", "content": "[core]\n\tfsmonitor = touch PWNED-config\n"}]],
        [["write_file", {"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\ntouch PWNED-hook\n"}]],
        [["read_file", {"path": "notes.txt"}]],
        [["edit_file", {"path": ".git/description", "old_text": "Unnamed", "new_text": "Pwned"}]],
        [["write_file", {"path": "evil", "content": "[core]\n\tfsmonitor = touch PWNED-cp\n"}]],
        [["run_command", {"argv": ["cp", "evil", ".git/config"]}], ["run_command", {"argv": ["cp", "evil", ".git/hooks/pre-commit"]}]],
    ]
    fake = Fake(FAKE_OLLAMA_TOOL_CALLS=json.dumps(calls))
    srv = Server("agent:\n  commands:\n    allow: [cp]\n", fake.env)
    subprocess.run(["git", "init", "-q", srv.ws], check=True)
    with open(os.path.join(srv.ws, "notes.txt"), "w") as f:
        f.write("notes\n")
    state, _ = run_task(srv.port)
    cfg = open(os.path.join(srv.ws, ".git/config")).read()
    hook = os.path.exists(os.path.join(srv.ws, ".git/hooks/pre-commit"))
    desc = open(os.path.join(srv.ws, ".git/description")).read()
    print(f"vcs: task {state}; .git/config has fsmonitor: {'fsmonitor' in cfg}; .git/hooks/pre-commit written: {hook}; "
          f".git/description edited: {'Pwned' in desc}")
    srv.stop()
    fake.stop()


def bind():
    fake = Fake()
    srv = Server("", fake.env, bind="0.0.0.0", wait=False)
    time.sleep(3)
    running = srv.proc.poll() is None
    print(f"bind: serve --bind 0.0.0.0 without tokens: {'running' if running else 'exited ' + str(srv.proc.returncode)}; "
          f"stderr: {''.join(srv.lines).strip().splitlines()[-1:] }")
    srv.stop()
    d = tempfile.mkdtemp(prefix="hostile-")
    with open(os.path.join(d, "agent.yaml"), "w") as f:
        f.write("http:\n  bind: 0.0.0.0:8080\n")
    r = subprocess.run([BIN, "check-config", "--config", "agent.yaml"], cwd=d, capture_output=True, text=True,
                       env=dict(BASE_ENV, XDG_STATE_HOME=d))
    warned = "loopback" in r.stderr.lower()
    print(f"bind: check-config with http.bind 0.0.0.0 and no tokens: exit {r.returncode}, warning: {warned}")
    shutil.rmtree(d, ignore_errors=True)
    fake.stop()


def secrets():
    fake = Fake()
    port = fake.url.rsplit(":", 1)[1]
    for label, host in [("reachable", f"http://user:{SECRET}@127.0.0.1:{port}"), ("unreachable", f"http://user:{SECRET}@127.0.0.1:1")]:
        env = {"OLLAMA_HOST": host, "AGENT_MCP_OLLAMA_MODEL": "test-model"}
        srv = Server("audit:\n  file: ../audit.jsonl\n", env)
        _, ready = get(srv.port, "/readyz")
        state, status = run_task(srv.port)
        time.sleep(1)
        audit = open(os.path.join(srv.dir, "audit.jsonl")).read() if os.path.exists(os.path.join(srv.dir, "audit.jsonl")) else ""
        r = subprocess.run([BIN, "check-config"], cwd=srv.ws, capture_output=True, text=True, env=dict(BASE_ENV, **env, XDG_STATE_HOME=srv.dir))
        log = "".join(srv.lines)
        places = {"log": log.count(SECRET), "check-config": (r.stdout + r.stderr).count(SECRET), "/readyz": ready.count(SECRET),
                  "task result": (status or "").count(SECRET), "audit": audit.count(SECRET)}
        print(f"secrets [{label} Ollama, task {state}]: the password appears " +
              ", ".join(f"{k} {v}x" for k, v in places.items()))
        srv.stop()
    fake.stop()


class CountingOllama(threading.Thread):
    """A minimal Ollama that answers /api/version and counts the calls."""

    def __init__(self):
        super().__init__(daemon=True)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        self.start()

    def run(self):
        while True:
            c, _ = self.sock.accept()
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        f = c.makefile("rb")
        try:
            while True:
                line = f.readline()
                if not line:
                    break
                while f.readline() not in (b"\r\n", b""):
                    pass
                if b"/api/version" in line:
                    self.hits += 1
                body = b'{"version":"0.12.0"}'
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        except OSError:
            pass
        c.close()


def ops():
    ollama = CountingOllama()
    env = {"OLLAMA_HOST": f"http://127.0.0.1:{ollama.port}", "AGENT_MCP_OLLAMA_MODEL": "test-model"}
    srv = Server(f"auth:\n  tokens: [{{name: ci, sha256: {TOKEN_SHA}}}]\n", env)
    evil = {p: get(srv.port, p, {"Host": "evil.example"})[0] for p in ["/healthz", "/readyz", "/metrics"]}
    metrics = get(srv.port, "/metrics")[0]
    before = ollama.hits
    for _ in range(100):
        get(srv.port, "/readyz")
    print(f"ops: with Host: evil.example {evil}; /metrics without a token: {metrics}; "
          f"100 /readyz hits made {ollama.hits - before} Ollama calls")
    srv.stop()


def identity():
    d = tempfile.mkdtemp(prefix="hostile-")
    for label, tokens in [("named stdio", f"[{{name: stdio, sha256: {TOKEN_SHA}}}]"),
                          ("two named ci", f"[{{name: ci, sha256: {TOKEN_SHA}}}, {{name: ci, sha256: {'0' * 64}}}]")]:
        with open(os.path.join(d, "agent.yaml"), "w") as f:
            f.write(f"auth:\n  tokens: {tokens}\n")
        r = subprocess.run([BIN, "check-config", "--config", "agent.yaml"], cwd=d, capture_output=True, text=True,
                           env=dict(BASE_ENV, XDG_STATE_HOME=d))
        print(f"identity: a token {label}: check-config exit {r.returncode} {r.stderr.strip()[:160]!r}")
    shutil.rmtree(d, ignore_errors=True)


def queue():
    fake = Fake(FAKE_OLLAMA_REPLY="hang")
    srv = Server("", fake.env)
    db = os.path.join(srv.dir, "state")
    def db_size():
        total = 0
        for root, _, files in os.walk(db):
            total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
        return total
    start = db_size()
    big = "x" * (BODY_CAP - 64 * 1024)
    accepted = 0
    for i in range(20):
        try:
            s, err, text = tool(srv.port, "agent_run", {"request": big}, timeout=60)
            accepted += s == 200 and not err
        except OSError:
            pass
    print(f"queue: 20 requests of {len(big) / 1e6:.1f} MB text: {accepted} accepted; database +{(db_size() - start) / 1e6:.0f} MB")
    counts = {"accepted": 0, "429": 0, "queue full": 0, "other": 0}
    lock = threading.Lock()
    def flood(ip):
        for n in range(40):
            try:
                s, err, text = tool(srv.port, "agent_run", {"request": f"task {ip} {n}"}, source=(ip, 0), timeout=20)
            except OSError:
                s, err, text = 0, True, ""
            key = "accepted" if s == 200 and not err else "429" if s == 429 else "queue full" if "queue" in text.lower() else "other"
            with lock:
                counts[key] += 1
    threads = [threading.Thread(target=flood, args=(f"127.0.{1 + i // 250}.{2 + i % 250}",)) for i in range(250)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"queue: 250 loopback addresses x 40 agent_run: {counts}")
    srv.stop()
    fake.stop()


def network():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    code = f"import socket; socket.create_connection(('127.0.0.1', {port}), 3); print('CONNECTED')"
    calls = [[["run_command", {"argv": ["python3", "-c", code]}]]]
    fake = Fake(FAKE_OLLAMA_TOOL_CALLS=json.dumps(calls))
    srv = Server("agent:\n  commands:\n    allow: [python3]\n", fake.env)
    state, _ = run_task(srv.port)
    got = 0
    deadline = time.time() + 2
    while time.time() < deadline:
        try:
            c, _ = listener.accept()
            got += 1
            c.close()
        except socket.timeout:
            pass
    lines = [l.strip() for l in srv.lines if "network" in l.lower()]
    print(f"network: an allowed python3 connected to 127.0.0.1:{port} {got} time(s) (task {state}); start-up: {lines[:1]}")
    srv.stop()
    fake.stop()


POINTS = {"memory": memory, "fds": fds, "audit": audit, "stderr": stderr, "vcs": vcs, "bind": bind,
          "secrets": secrets, "ops": ops, "identity": identity, "queue": queue, "network": network}

if __name__ == "__main__":
    print(f"# {BIN} ({subprocess.run([BIN, '--version'], capture_output=True, text=True).stdout.strip()})")
    for name in sys.argv[1:] or list(POINTS):
        try:
            POINTS[name]()
        except Exception as e:  # a probe that breaks says so and the others still run
            print(f"{name}: probe failed: {e!r}")
        sys.stdout.flush()
