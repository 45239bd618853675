// The oversight page of agent-mcp. Every piece of task text goes into the page with
// textContent, never as markup: a request or result holding tags shows as text.
"use strict";

const TOKEN_KEY = "agent-mcp-token";
let selected = null;
let streamAbort = null;

function $(id) {
  return document.getElementById(id);
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

function headers() {
  const h = {};
  const t = token();
  if (t) {
    h["Authorization"] = "Bearer " + t;
  }
  return h;
}

function say(text, isError) {
  const m = $("message");
  m.textContent = text;
  m.className = isError ? "error" : "";
}

async function api(path, method) {
  const resp = await fetch(path, { method: method || "GET", headers: headers(), cache: "no-store" });
  const type = resp.headers.get("content-type") || "";
  const body = type.startsWith("application/json") ? await resp.json() : await resp.text();
  if (!resp.ok) {
    const message = body && body.message ? body.message : String(body);
    const error = new Error(message);
    error.status = resp.status;
    throw error;
  }
  return body;
}

function age(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return s + " s";
  if (s < 3600) return Math.floor(s / 60) + " min";
  if (s < 86400) return Math.floor(s / 3600) + " h";
  return Math.floor(s / 86400) + " d";
}

function progress(t) {
  let p = t.steps_done + "/" + t.steps_total;
  if (t.current_task) p += " " + t.current_task;
  if (t.waiting) p += " (waiting for approval)";
  return p;
}

function cell(text, className) {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

function renderList(list) {
  const body = $("tasks");
  const rows = [];
  for (const t of list.tasks) {
    const tr = document.createElement("tr");
    tr.dataset.id = t.id;
    tr.dataset.state = t.state;
    if (t.id === selected) tr.className = "selected";
    tr.append(
      cell(t.state, "state state-" + t.state),
      cell(t.position == null ? "" : String(t.position)),
      cell(age(list.now_ms - t.created_ms)),
      cell(progress(t)),
      cell(t.request, "request"),
    );
    tr.addEventListener("click", () => select(t.id));
    rows.push(tr);
  }
  body.replaceChildren(...rows);
  $("empty").hidden = list.tasks.length > 0;
}

function renderDiff(text) {
  const pre = $("task-diff");
  const lines = [];
  for (const line of text.split("\n")) {
    if (line === "") continue;
    const span = document.createElement("span");
    if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff ")) span.className = "head";
    else if (line.startsWith("@@")) span.className = "hunk";
    else if (line.startsWith("+")) span.className = "add";
    else if (line.startsWith("-")) span.className = "del";
    else span.className = "ctx";
    span.textContent = line;
    lines.push(span);
  }
  pre.replaceChildren(...lines);
}

function listItems(id, items) {
  const ul = $(id);
  ul.replaceChildren(
    ...items.map((text) => {
      const li = document.createElement("li");
      li.textContent = text;
      return li;
    }),
  );
}

function renderTask(t) {
  $("task").hidden = false;
  $("task-id").textContent = t.id;
  const state = $("task-state");
  state.textContent = t.state + (t.position == null ? "" : " (position " + t.position + ")");
  state.className = "state state-" + t.state;
  $("task-progress").textContent = progress(t);
  $("task-tokens").textContent = t.tokens_in + " in, " + t.tokens_out + " out";
  $("task-age").textContent = age(t.now_ms - t.created_ms);
  $("task-request").textContent = t.request;
  $("task-result").textContent = t.result;
  listItems("task-decisions", t.decisions);
  listItems("task-files", t.files);
  const journal = t.journal.map((e) => {
    const li = document.createElement("li");
    li.className = "entry entry-" + e.kind.replace(/ /g, "-");
    const kind = document.createElement("span");
    kind.className = "kind";
    kind.textContent = (e.step == null ? "" : "step " + (e.step + 1) + " · ") + e.kind;
    const text = document.createElement("span");
    text.textContent = e.text;
    li.append(kind, text);
    return li;
  });
  $("task-journal").replaceChildren(...journal);
  renderDiff(t.diff);
  const approvals = t.pending.map((p) => {
    const box = document.createElement("div");
    box.className = "approval";
    box.dataset.key = p.key;
    const what = document.createElement("p");
    what.textContent = p.key + ": " + p.tool + " " + p.summary;
    box.append(what);
    if (p.detail) {
      const detail = document.createElement("pre");
      detail.textContent = p.detail;
      box.append(detail);
    }
    for (const action of ["accept", "decline"]) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = action;
      b.textContent = action;
      b.addEventListener("click", () => act("approvals/" + encodeURIComponent(p.key) + "?action=" + action));
      box.append(b);
    }
    return box;
  });
  $("approvals").replaceChildren(...approvals);
  const terminal = ["completed", "failed", "cancelled"].includes(t.state);
  $("cancel").hidden = terminal;
  $("undo").hidden = !terminal || t.files.length === 0 || t.undone;
}

async function act(what) {
  if (!selected) return;
  try {
    const r = await api("/api/tasks/" + selected + "/" + what, "POST");
    say(r.message, false);
  } catch (e) {
    say(e.message, true);
  }
  await refresh();
}

async function refresh() {
  try {
    renderList(await api("/api/tasks"));
    if (selected) renderTask(await api("/api/tasks/" + selected));
  } catch (e) {
    say(e.status === 401 ? "This server needs a token: enter it above. (" + e.message + ")" : e.message, true);
  }
}

function select(id) {
  selected = id;
  history.replaceState(null, "", "#task=" + id);
  for (const tr of $("tasks").children) {
    tr.className = tr.dataset.id === id ? "selected" : "";
  }
  refresh();
}

// The event stream is read with fetch (EventSource cannot send the Authorization header).
async function follow() {
  if (streamAbort) streamAbort.abort();
  const abort = new AbortController();
  streamAbort = abort;
  const live = $("live");
  while (!abort.signal.aborted) {
    try {
      const resp = await fetch("/api/events", { headers: headers(), signal: abort.signal, cache: "no-store" });
      if (!resp.ok || !resp.body) throw new Error("HTTP " + resp.status);
      live.textContent = "live";
      live.className = "live on";
      const reader = resp.body.getReader();
      const decoder = new TextDecoder();
      let buffered = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffered += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffered.indexOf("\n\n")) >= 0) {
          const event = buffered.slice(0, end);
          buffered = buffered.slice(end + 2);
          if (event.startsWith("event: changed")) await refresh();
        }
      }
    } catch (e) {
      if (abort.signal.aborted) return;
    }
    live.textContent = "offline";
    live.className = "live off";
    await new Promise((r) => setTimeout(r, 1000));
  }
}

function start() {
  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.get("token")) {
    sessionStorage.setItem(TOKEN_KEY, hash.get("token"));
    hash.delete("token");
  }
  if (hash.get("task")) selected = hash.get("task");
  history.replaceState(null, "", hash.toString() ? "#" + hash.toString() : location.pathname);
  $("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value);
    $("token").value = "";
    say("", false);
    refresh();
    follow();
  });
  $("cancel").addEventListener("click", () => act("cancel"));
  $("undo").addEventListener("click", () => act("undo"));
  refresh();
  follow();
}

document.addEventListener("DOMContentLoaded", start);
