// The official TypeScript MCP client (@modelcontextprotocol/client) and the official Tasks
// extension client (@modelcontextprotocol/ext-tasks) against agent-mcp, over Streamable HTTP and
// stdio, in the 2026-07-28 era (server/discover, the io.modelcontextprotocol/tasks extension)
// and the 2025-11-25 era (initialize, experimental tasks). One line per check, then the total.
import { createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";
import fs from "node:fs";
import path from "node:path";
import { ERAS, UUID, assert, check, connect, fields, sleep, summary, textOf } from "./lib.mjs";

const TRANSPORTS = ["http", "stdio"];

/** agent_status through the SDK's plain tools/call (no task), parsed into its fields. */
async function agentStatus(client, taskId) {
  const result = await client.callTool({ name: "agent_status", arguments: { task_id: taskId } });
  assert(result.isError !== true, `agent_status isError: ${textOf(result)}`);
  return fields(textOf(result));
}

/** Polls agent_status until `status` is one of `wanted` (bounded). */
async function waitForStatus(client, taskId, wanted, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    last = await agentStatus(client, taskId);
    if (wanted.includes(last.status)) return last;
    await sleep(500);
  }
  throw new Error(`task ${taskId} still ${last?.status}, expected ${wanted.join(" or ")}`);
}

/** An ext-tasks session on a connected client; 2026-07-28 sessions get the raw request path. */
function taskSession(conn, label) {
  const modern = conn.client.getProtocolEra() === "modern";
  return createTaskSessionFromClient(conn.client, {
    endpointId: `agent-mcp-ci-${label}`,
    ...(modern
      ? {
          rawDispatch: conn.wire.dispatch,
          v2RequestFraming: conn.wire.framing(conn.client.getNegotiatedProtocolVersion()),
        }
      : {}),
    onError: (error) => console.log(`     (ext-tasks onError: ${error.message})`),
  });
}

async function close(conn, session) {
  await session?.close().catch(() => {});
  await conn?.client.close().catch(() => {});
}

async function completedTask(transport, era) {
  const tag = `[${transport} ${era}]`;
  const settings = ERAS[era];
  const conn = await check(`${tag} connect: ${settings.era} era at ${settings.version}`, async () => {
    const conn = await connect({ transport, era });
    assert(
      conn.client.getProtocolEra() === settings.era,
      `era ${conn.client.getProtocolEra()}, expected ${settings.era}`,
    );
    assert(
      conn.client.getNegotiatedProtocolVersion() === settings.version,
      `version ${conn.client.getNegotiatedProtocolVersion()}`,
    );
    assert(conn.client.getServerVersion()?.name === "agent-mcp", "serverInfo.name is not agent-mcp");
    return conn;
  });
  if (!conn) return;
  let session;
  try {
    await check(`${tag} tools/list: agent_run and agent_status with their input schemas`, async () => {
      const { tools } = await conn.client.listTools();
      const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
      const run = byName.agent_run;
      const status = byName.agent_status;
      assert(run && status, `tools: ${tools.map((t) => t.name).join(", ")}`);
      assert(run.inputSchema.type === "object", "agent_run inputSchema.type");
      assert(run.inputSchema.required?.includes("request"), "agent_run does not require `request`");
      assert(status.inputSchema.required?.includes("task_id"), "agent_status does not require `task_id`");
      assert(status.annotations?.readOnlyHint === true, "agent_status is not readOnlyHint");
      if (settings.era === "legacy") {
        assert(run.execution?.taskSupport === "optional", `agent_run execution: ${JSON.stringify(run.execution)}`);
      } else {
        assert(run.execution === undefined, "a 2026-07-28 tool carries `execution`");
      }
    });

    session = await check(`${tag} ext-tasks: the session sees task execution and cancellation`, async () => {
      const session = taskSession(conn, `${transport}-${era}`);
      assert(session.capabilities.execution, `capabilities ${JSON.stringify(session.capabilities)}`);
      assert(session.capabilities.cancellation, `capabilities ${JSON.stringify(session.capabilities)}`);
      return session;
    });

    const execution = await check(`${tag} ext-tasks: agent_run comes back as a task`, async () => {
      assert(session, "no session");
      const execution = await session.callTool(
        "agent_run",
        { request: "Say hello." },
        { task: { preference: "prefer" }, requestTimeoutMs: 60_000 },
      );
      assert(execution.kind === "task", `execution kind ${execution.kind}`);
      assert(UUID.test(execution.handle.taskId), `taskId ${execution.handle.taskId}`);
      return execution;
    });

    await check(`${tag} ext-tasks: the task settles completed with the agent_status text`, async () => {
      assert(execution, "no task");
      const { outcome } = await execution.settle();
      if (outcome.status === "failed") throw outcome.error;
      assert(outcome.status === "completed", `outcome ${outcome.status}`);
      assert(outcome.result.isError !== true, `isError: ${textOf(outcome.result)}`);
      const text = fields(textOf(outcome.result));
      assert(text.task_id === execution.handle.taskId, `task_id ${text.task_id}`);
      assert(text.status === "completed", `status ${text.status}`);
      assert(text.result === "Hello from the fake model.", `result ${JSON.stringify(text.result)}`);
    });

    await check(`${tag} agent_status reads the same task as completed`, async () => {
      assert(execution, "no task");
      const status = await agentStatus(conn.client, execution.handle.taskId);
      assert(status.status === "completed", `status ${status.status}`);
      assert(status.result === "Hello from the fake model.", `result ${status.result}`);
    });
  } finally {
    await close(conn, session);
  }
}

async function cancelledTasks(transport, era) {
  const tag = `[${transport} ${era}]`;
  const conn = await check(`${tag} connect to the server whose model never answers`, () =>
    connect({ transport, era, server: "hang" }),
  );
  if (!conn) return;
  const session = taskSession(conn, `${transport}-${era}-hang`);
  const start = (request) =>
    session.callTool("agent_run", { request }, { task: { preference: "prefer" }, requestTimeoutMs: 60_000 });
  try {
    const running = await check(`${tag} ext-tasks: a task is running`, async () => {
      const execution = await start("This one runs until it is cancelled.");
      assert(execution.kind === "task", `execution kind ${execution.kind}`);
      await waitForStatus(conn.client, execution.handle.taskId, ["running"]);
      return execution;
    });
    const queued = await check(`${tag} ext-tasks: a second task is queued behind it`, async () => {
      const execution = await start("This one waits, then is cancelled.");
      assert(execution.kind === "task", `execution kind ${execution.kind}`);
      const status = await agentStatus(conn.client, execution.handle.taskId);
      assert(status.status === "queued", `status ${status.status}`);
      return execution;
    });

    for (const [label, execution, other] of [
      ["queued", queued, running],
      ["running", running, undefined],
    ]) {
      await check(`${tag} ext-tasks: cancelling the ${label} task ends it cancelled`, async () => {
        assert(execution, `no ${label} task`);
        const taskId = execution.handle.taskId;
        await execution.cancel();
        const { outcome } = await execution.settle();
        assert(outcome.status === "cancelled", `local outcome ${outcome.status}`);
        // The server's view, through the extension (tasks/get) and through agent_status.
        const deadline = Date.now() + 30_000;
        let view = await session.task(taskId).snapshot();
        while (view.status !== "cancelled" && Date.now() < deadline) {
          await sleep(500);
          view = await session.task(taskId).snapshot();
        }
        assert(view.status === "cancelled", `tasks/get status ${view.status}`);
        const status = await agentStatus(conn.client, taskId);
        assert(status.status === "cancelled", `agent_status ${status.status}`);
        if (other) {
          const still = await agentStatus(conn.client, other.handle.taskId);
          assert(still.status === "running", `the running task is now ${still.status}`);
        }
      });
    }
  } finally {
    await close(conn, session);
  }
}

/**
 * A polite client must never be refused: three tasks followed at once, each polled at the
 * pollIntervalMs the server advertises, for as long as they take (about 20 s each, run one after
 * another: about a minute of polling).
 */
async function politePolling() {
  const tag = "[http 2026-07-28]";
  const conn = await check(`${tag} connect to the server whose model takes about 20 s a task`, () =>
    connect({ transport: "http", era: "2026-07-28", server: "slow" }),
  );
  if (!conn) return;
  const session = taskSession(conn, "http-slow");
  try {
    await check(
      `${tag} ext-tasks: three tasks followed at once at the advertised pollIntervalMs all complete (none refused)`,
      async () => {
        const executions = await Promise.all(
          [1, 2, 3].map((i) =>
            session.callTool(
              "agent_run",
              { request: `Polite task ${i}.` },
              { task: { preference: "prefer" }, requestTimeoutMs: 60_000 },
            ),
          ),
        );
        const settled = await Promise.all(executions.map((e) => e.settle()));
        settled.forEach(({ outcome }, i) => {
          if (outcome.status === "failed") throw outcome.error;
          assert(outcome.status === "completed", `task ${i + 1}: outcome ${outcome.status}`);
          const text = fields(textOf(outcome.result));
          assert(text.status === "completed", `task ${i + 1}: status ${text.status}`);
        });
        // ext-tasks retries a refused poll by itself, so count refusals on the wire.
        const refused = conn.wire.failures;
        assert(refused.length === 0, `${refused.length} requests refused, the first: ${refused[0]}`);
      },
      300_000,
    );
  } finally {
    await close(conn, session);
  }
}

/**
 * Following by push (2026-07-28): the SDK client's `listen({ taskIds })` on a client that
 * declares the Tasks extension; ext-tasks consumes the `notifications/tasks` (it settles on the
 * terminal one, though it keeps polling `tasks/get` at pollIntervalMs meanwhile: ext-tasks 0.2.2
 * has no notification-only mode).
 */
async function followByPush(transport) {
  const tag = `[${transport} 2026-07-28]`;
  const conn = await check(`${tag} connect declaring the Tasks extension`, () =>
    connect({
      transport,
      era: "2026-07-28",
      capabilities: { extensions: { "io.modelcontextprotocol/tasks": {} } },
    }),
  );
  if (!conn) return;
  const pushed = [];
  const forward = conn.transport.onmessage;
  conn.transport.onmessage = (message, extra) => {
    if (message?.method === "notifications/tasks") pushed.push({ at: Date.now(), task: message.params });
    forward?.call(conn.transport, message, extra);
  };
  const session = taskSession(conn, `${transport}-push`);
  try {
    await check(`${tag} push: subscriptions/listen delivers every change up to the completed task with its result`, async () => {
      const execution = await session.callTool(
        "agent_run",
        { request: "Follow me by push." },
        { task: { preference: "prefer" }, requestTimeoutMs: 60_000 },
      );
      assert(execution.kind === "task", `execution kind ${execution.kind}`);
      const taskId = execution.handle.taskId;
      const subscription = await conn.client.listen({ taskIds: [taskId] });
      const { outcome } = await execution.settle();
      assert(outcome.status === "completed", `outcome ${outcome.status}`);
      const deadline = Date.now() + 10_000;
      while (pushed.at(-1)?.task.status !== "completed" && Date.now() < deadline) await sleep(50);
      const mine = pushed.filter((p) => p.task.taskId === taskId);
      assert(mine.length >= 2, `${mine.length} notifications/tasks`);
      const last = mine.at(-1).task;
      assert(last.status === "completed", `last pushed status ${last.status}`);
      assert(fields(textOf(last.result)).result === "Hello from the fake model.", "the pushed result");
      const ended = await Promise.race([subscription.closed, sleep(10_000).then(() => "still open")]);
      assert(ended === "graceful", `the listen ended ${ended}`);
      console.log(`     (${mine.length} notifications/tasks; ext-tasks also polled meanwhile)`);
    });
  } finally {
    await close(conn, session);
  }
}

/**
 * Approvals through ext-tasks' onInputRequest: the server (agent.approvals.write_file: ask) has
 * a model that writes two files, one call after the other; the task goes input_required twice,
 * ext-tasks hands each new key to onInputRequest, which accepts the first and declines the
 * second, and answers with tasks/update. Only the accepted file is written, and the task's
 * record says who decided what.
 */
async function approvals() {
  const tag = "[http 2026-07-28]";
  if (!process.env.MCP_URL_APPROVALS) return;
  const elicitation = { elicitation: { form: {} } };
  const conn = await check(`${tag} connect to the server whose write_file asks`, () =>
    connect({ transport: "http", era: "2026-07-28", server: "approvals", capabilities: elicitation }),
  );
  if (!conn) return;
  const asked = [];
  const session = createTaskSessionFromClient(conn.client, {
    endpointId: "agent-mcp-ci-approvals",
    rawDispatch: conn.wire.dispatch,
    v2RequestFraming: conn.wire.framing(conn.client.getNegotiatedProtocolVersion(), elicitation),
    onError: (error) => console.log(`     (ext-tasks onError: ${error.message})`),
    onInputRequest: async (request, context) => {
      asked.push({ key: context.inputId, request });
      return { action: asked.length === 1 ? "accept" : "decline" };
    },
  });
  try {
    const execution = await check(`${tag} ext-tasks: agent_run with write_file asking comes back as a task`, async () => {
      const execution = await session.callTool(
        "agent_run",
        { request: "Say hello." },
        { task: { preference: "prefer" }, requestTimeoutMs: 60_000 },
      );
      assert(execution.kind === "task", `execution kind ${execution.kind}`);
      return execution;
    });
    await check(`${tag} ext-tasks: onInputRequest accepts one write and declines the other; the task completes`, async () => {
      assert(execution, "no task");
      const { outcome } = await execution.settle();
      if (outcome.status === "failed") throw outcome.error;
      assert(outcome.status === "completed", `outcome ${outcome.status}`);
      assert(asked.length === 2, `${asked.length} input requests: ${JSON.stringify(asked)}`);
      assert(
        asked.map((a) => a.key).join(",") === "approval-1,approval-2",
        `keys ${asked.map((a) => a.key)}`,
      );
      for (const { request } of asked) {
        assert(request.kind === "elicitation", `kind ${request.kind}`);
        assert(request.params.mode === "form", `mode ${request.params.mode}`);
        assert(request.params.message.includes("write_file: "), `message ${request.params.message}`);
      }
      const text = textOf(outcome.result);
      assert(text.includes("- approval-1 write_file (accepted.txt): accept"), text);
      assert(text.includes("- approval-2 write_file (declined.txt): decline"), text);
    });
    await check(`${tag} the accepted file is written, the declined one is not`, async () => {
      const dir = process.env.APPROVALS_WORKSPACE;
      assert(dir, "APPROVALS_WORKSPACE is not set");
      assert(fs.existsSync(path.join(dir, "accepted.txt")), "accepted.txt is missing");
      assert(!fs.existsSync(path.join(dir, "declined.txt")), "declined.txt was written");
    });
  } finally {
    await close(conn, session);
  }
}

// The minute of polite polling runs beside the other checks (on a server of its own).
const polite = politePolling();
for (const transport of TRANSPORTS) {
  for (const era of Object.keys(ERAS)) {
    await completedTask(transport, era);
    await cancelledTasks(transport, era);
  }
  await followByPush(transport);
}
await approvals();
await polite;
summary();
