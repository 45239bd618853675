// The MCP Inspector CLI (@modelcontextprotocol/inspector, `--cli`) against agent-mcp, over
// Streamable HTTP and stdio, with `--protocol-era modern` (2026-07-28; the Inspector follows
// `agent_run` as a task through its bundled Tasks client) and `--protocol-era legacy`
// (2025 initialize). Each check is one Inspector invocation, as a person or a CI job runs it.
// One line per check, then "N passed, N failed". Run by scripts/clients.sh.
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync } from "node:fs";
import { join } from "node:path";

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (run through scripts/clients.sh)`);
  return value;
};
const NODE = env("NODE");
const CLI = env("INSPECTOR_CLI");
const WORK = env("CLIENTS_WORK");
// The Inspector keeps a catalog, client config and secrets under $HOME: give it one of its own.
const HOME = join(WORK, "inspector-home");
mkdirSync(HOME, { recursive: true });

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const TOOL_IS_ERROR_EXIT = 5; // the Inspector's exit code for a tools/call answered with isError

let passed = 0;
let failed = 0;

async function check(name, fn) {
  try {
    const value = await fn();
    passed += 1;
    console.log(`ok   ${name}`);
    return value;
  } catch (error) {
    failed += 1;
    console.log(`FAIL ${name}: ${String(error?.message ?? error).replace(/\s+/g, " ")}`);
    return undefined;
  }
}

function assert(condition, message) {
  if (!condition) throw new Error(message);
}

/** One Inspector run: resolves { code, stdout, stderr, json } (json = last JSON line of stdout). */
function inspector(target, era, args, timeoutMs = 90_000) {
  return new Promise((resolve, reject) => {
    const argv = [CLI, "--cli", "--protocol-era", era, "--format", "json", ...args];
    if (target.url) argv.push(target.url);
    else argv.push("--cwd", target.cwd, ...target.env.flatMap((e) => ["-e", e]), "--", ...target.command);
    const child = spawn(NODE, argv, {
      env: { PATH: process.env.PATH, HOME, MCP_CATALOG_PATH: join(HOME, "mcp.json") },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`inspector ${args.join(" ")} timed out after ${timeoutMs} ms`));
    }, timeoutMs);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      let json;
      for (const line of stdout.trim().split("\n").reverse()) {
        try {
          json = JSON.parse(line);
          break;
        } catch {
          // not the JSON line
        }
      }
      resolve({ code, stdout, stderr, json });
    });
  });
}

function explain(run) {
  return `exit ${run.code}; stdout ${run.stdout.slice(0, 300)}; stderr ${run.stderr.trim().split("\n").slice(-3).join(" | ").slice(0, 400)}`;
}

const textOf = (result) =>
  (result?.content ?? []).filter((b) => b.type === "text").map((b) => b.text).join("\n");

function fields(text) {
  const out = {};
  for (const line of text.split("\n")) {
    const match = /^([a-z_]+): ?(.*)$/.exec(line);
    if (match && !(match[1] in out)) out[match[1]] = match[2];
  }
  return out;
}

const call = (target, era, tool, args, extra = []) =>
  inspector(target, era, ["--method", "tools/call", "--tool-name", tool, "--tool-args-json", JSON.stringify(args), ...extra]);

async function combination(transport, era) {
  const tag = `[${transport} ${era === "modern" ? "2026-07-28" : "2025-11-25"}]`;
  const target =
    transport === "http"
      ? { url: env("MCP_URL") }
      : {
          // As a host starts it: in an empty folder, only the fake's Ollama URL and model set.
          command: [env("CLIENTS_SERVER_BIN"), "stdio"],
          cwd: mkdtempSync(join(WORK, "stdio-")),
          env: [`OLLAMA_HOST=${env("OLLAMA_URL")}`, "AGENT_MCP_OLLAMA_MODEL=test-model", "RUST_LOG=warn"],
        };

  await check(`${tag} tools/list: agent_run and agent_status`, async () => {
    const run = await inspector(target, era, ["--method", "tools/list"]);
    assert(run.code === 0, explain(run));
    const names = (run.json?.result?.tools ?? []).map((t) => t.name).sort();
    assert(names.join(",") === "agent_run,agent_status", `tools ${names}`);
    const agentRun = run.json.result.tools.find((t) => t.name === "agent_run");
    if (era === "legacy") {
      assert(agentRun.execution?.taskSupport === "optional", `execution ${JSON.stringify(agentRun.execution)}`);
    }
  });

  await check(`${tag} tools/list --strict: no schema portability error`, async () => {
    const run = await inspector(target, era, ["--method", "tools/list", "--strict"]);
    assert(run.code === 0, explain(run));
  });

  const oneShotStdio = transport === "stdio" && era === "legacy";
  const followed = oneShotStdio
    ? "queues a task (each one-shot stdio run is its own server, gone when the CLI exits)"
    : era === "modern"
      ? "is followed as a task to completed"
      : "then agent_status polled to completed";
  await check(`${tag} tools/call agent_run ${followed}`, async () => {
    const run = await call(target, era, "agent_run", { request: "Say hello." });
    assert(run.code === 0, explain(run));
    const result = run.json?.result;
    assert(result && result.isError !== true, explain(run));
    let status = fields(textOf(result));
    assert(UUID.test(status.task_id ?? ""), `no task_id in ${JSON.stringify(textOf(result))}`);
    if (era === "modern") {
      // The Inspector declares the Tasks extension, gets a task and follows it to its result.
      assert(status.status === "completed", `status ${status.status}: ${JSON.stringify(textOf(result))}`);
    } else if (!oneShotStdio) {
      // No task in the 2025 era (taskSupport is optional and the CLI does not ask for one):
      // poll agent_status the way a person would, one invocation a second.
      for (let i = 0; i < 60 && status.status !== "completed"; i += 1) {
        await new Promise((r) => setTimeout(r, 1000));
        const poll = await call(target, era, "agent_status", { task_id: status.task_id });
        assert(poll.code === 0, explain(poll));
        status = fields(textOf(poll.json?.result));
      }
      assert(status.status === "completed", `status ${status.status}`);
    } else {
      // Over stdio each invocation is a fresh server process: the task is only queued.
      assert(["queued", "running", "completed"].includes(status.status), `status ${status.status}`);
    }
    if (status.status === "completed") {
      assert(status.result === "Hello from the fake model.", `result ${JSON.stringify(status.result)}`);
    }
  });

  await check(`${tag} agent_run with an empty request: isError (exit ${TOOL_IS_ERROR_EXIT})`, async () => {
    const run = await call(target, era, "agent_run", { request: "" });
    assert(run.code === TOOL_IS_ERROR_EXIT, explain(run));
    assert(run.json?.result?.isError === true, explain(run));
  });

  await check(`${tag} agent_status with a malformed task_id: isError (exit ${TOOL_IS_ERROR_EXIT})`, async () => {
    const run = await call(target, era, "agent_status", { task_id: "not-a-uuid" });
    assert(run.code === TOOL_IS_ERROR_EXIT, explain(run));
    assert(run.json?.result?.isError === true, explain(run));
  });
}

for (const transport of ["http", "stdio"]) {
  for (const era of ["modern", "legacy"]) {
    await combination(transport, era);
  }
}
console.log(`${passed} passed, ${failed} failed`);
process.exitCode = failed === 0 ? 0 : 1;
