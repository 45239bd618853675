// Shared by the TypeScript client checks: the check reporter, connecting the official SDK client
// to agent-mcp (HTTP or stdio, either era), and the raw request path ext-tasks needs for
// 2026-07-28 task traffic. Run by scripts/clients.sh from .tools/clients-ts (where the pinned
// packages are installed); the environment it sets is read here.
import { mkdtempSync, openSync } from "node:fs";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

export const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (run through scripts/clients.sh)`);
  return value;
};

// ---------------------------------------------------------------------------------------------
// Reporting: one line per check, then "N passed, N failed".

let passed = 0;
let failed = 0;

/** Runs one check, bounded by `timeoutMs`; never throws. Returns the function's value or undefined. */
export async function check(name, fn, timeoutMs = 90_000) {
  let timer;
  try {
    const value = await Promise.race([
      fn(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
    passed += 1;
    console.log(`ok   ${name}`);
    return value;
  } catch (error) {
    failed += 1;
    console.log(`FAIL ${name}: ${describe(error)}`);
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}

/** Prints the total and sets the exit code. */
export function summary() {
  console.log(`${passed} passed, ${failed} failed`);
  process.exitCode = failed === 0 ? 0 : 1;
}

export function describe(error) {
  if (!(error instanceof Error)) return String(error);
  let text = `${error.name}: ${error.message}`;
  if (error.code !== undefined) text += ` (code ${error.code})`;
  if (error.cause !== undefined) text += ` [cause: ${describe(error.cause)}]`;
  return text.replace(/\s+/g, " ");
}

export function assert(condition, message) {
  if (!condition) throw new Error(message);
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------
// Connecting.

export const ERAS = {
  // `auto` probes server/discover and must land on the modern era by itself.
  "2026-07-28": { versionNegotiation: { mode: "auto" }, era: "modern", version: "2026-07-28" },
  // The SDK's default: the plain 2025 `initialize` handshake at its latest 2025 revision.
  "2025-11-25": { versionNegotiation: { mode: "legacy" }, era: "legacy", version: "2025-11-25" },
};

export const CLIENT_INFO = { name: "agent-mcp-ci-ts-client", version: "1.0.0" };

/**
 * A fresh stdio server, as a host starts it: `agent-mcp stdio` in its own empty working folder,
 * configured only by the Ollama URL and model of the fake.
 */
export function stdioParameters(ollamaUrl) {
  const work = mkdtempSync(join(env("CLIENTS_WORK"), "stdio-"));
  return {
    command: env("CLIENTS_SERVER_BIN"),
    args: ["stdio"],
    cwd: work,
    env: { OLLAMA_HOST: ollamaUrl, AGENT_MCP_OLLAMA_MODEL: "test-model", RUST_LOG: "warn" },
    stderr: openSync(join(work, "server.log"), "a"),
  };
}

/**
 * Connects the official client. `server` is "fast" (the fake model answers in about 2 s),
 * "slow" (about 20 s) or "hang" (every model call hangs until cancelled); `capabilities` are the
 * client's declared capabilities. Returns { client, transport, wire } where `wire` is the raw
 * request path on the same transport (for ext-tasks).
 */
export async function connect({ transport: kind, era, server = "fast", capabilities = {} }) {
  const settings = ERAS[era];
  const client = new Client(CLIENT_INFO, {
    versionNegotiation: settings.versionNegotiation,
    capabilities,
  });
  const suffix = { fast: "", hang: "_HANG", slow: "_SLOW", approvals: "_APPROVALS" }[server];
  const transport =
    kind === "http"
      ? new StreamableHTTPClientTransport(new URL(env(`MCP_URL${suffix}`)))
      : new StdioClientTransport(stdioParameters(env(`OLLAMA_URL${suffix}`)));
  await client.connect(transport, { timeout: 30_000 });
  const wire = new RawWire(transport);
  return { client, transport, wire, settings };
}

// ---------------------------------------------------------------------------------------------
// The raw request path.
//
// ext-tasks sends 2026-07-28 `tools/call` and `tasks/*` itself (the SDK client's codecs do not
// know the Tasks extension's result shapes) through a host-supplied `rawDispatch`. This one
// writes the request onto the client's own transport under an id of its own and takes the
// matching response off the transport before the SDK client sees it.

export class RawWire {
  #transport;
  #pending = new Map();
  #next = 0;
  /** Every request the transport could not deliver or the server refused (e.g. HTTP 429), as text. */
  failures = [];

  constructor(transport) {
    this.#transport = transport;
    const forward = transport.onmessage;
    transport.onmessage = (message, extra) => {
      const id = message?.id;
      if (typeof id === "string" && this.#pending.has(id) && !("method" in message)) {
        const settle = this.#pending.get(id);
        this.#pending.delete(id);
        settle(message);
        return;
      }
      forward?.call(transport, message, extra);
    };
  }

  /** ext-tasks' RawClientDispatch: a JSON-RPC request without id in, { kind, result | error } out. */
  dispatch = async (request, options = {}) => {
    const id = `ext-tasks-raw-${++this.#next}`;
    const timeoutMs = options.context?.requestTimeoutMs ?? 60_000;
    const signal = options.signal;
    if (signal?.aborted) throw signal.reason ?? new Error("aborted");
    const response = new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new Error(`no response to ${request.method} within ${timeoutMs} ms`));
      }, timeoutMs);
      const onAbort = () => {
        clearTimeout(timer);
        this.#pending.delete(id);
        reject(signal.reason ?? new Error("aborted"));
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#pending.set(id, (message) => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        resolve(message);
      });
    });
    try {
      await this.#transport.send(
        { jsonrpc: "2.0", id, method: request.method, params: request.params },
        options.context?.headers ? { headers: options.context.headers } : undefined,
      );
    } catch (error) {
      // ext-tasks retries failed reads quietly; keep them visible to the checks.
      this.failures.push(`${request.method}: ${describe(error)}`);
      this.#pending.get(id)?.({ error: { code: -32603, message: `transport: ${describe(error)}` } });
      this.#pending.delete(id);
      throw error;
    }
    const message = await response;
    if ("error" in message) {
      this.failures.push(`${request.method}: JSON-RPC ${message.error.code} ${message.error.message}`);
      return { kind: "error", error: message.error };
    }
    return { kind: "result", result: message.result };
  };

  /** The framing ext-tasks stamps on its raw 2026-07-28 requests. */
  framing(version, clientCapabilities = {}) {
    return { protocolVersion: version, clientInfo: CLIENT_INFO, clientCapabilities };
  }
}

// ---------------------------------------------------------------------------------------------
// agent-mcp specifics.

/** The text of a CallToolResult's content, joined. */
export function textOf(result) {
  return (result?.content ?? [])
    .filter((block) => block.type === "text")
    .map((block) => block.text)
    .join("\n");
}

/** `key: value` lines of an agent_run / agent_status text. */
export function fields(text) {
  const out = {};
  for (const line of text.split("\n")) {
    const match = /^([a-z_]+): ?(.*)$/.exec(line);
    if (match && !(match[1] in out)) out[match[1]] = match[2];
  }
  return out;
}

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
