"""The official Python MCP SDK (`mcp` 2.x, its high-level `Client`) against agent-mcp.

Over Streamable HTTP and stdio, in the 2026-07-28 era (`mode="auto"`: server/discover) and the
2025 era (`mode="legacy"`: initialize): the tool schemas, a task polled to the end with
agent_status, a session continued, and bad input answered as a tool error (isError), not as a
crash. One line per check, then "N passed, N failed". Run by scripts/clients.sh, which sets
the environment read below.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import traceback
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, ElicitResult, Implementation

T = TypeVar("T")

ERAS = {
    # mode, expected negotiated version
    "2026-07-28": ("auto", "2026-07-28"),
    "2025-11-25": ("legacy", "2025-11-25"),
}
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
TERMINAL = ("completed", "failed", "cancelled")
FAKE_REPLY = "Hello from the fake model."
CLIENT_INFO = Implementation(name="agent-mcp-ci-python-client", version="1.0.0")

passed = 0
failed = 0


def env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        sys.exit(f"{name} is not set (run through scripts/clients.sh)")
    return value


class CheckFailed(Exception):
    pass


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def describe(error: BaseException) -> str:
    if isinstance(error, CheckFailed):
        return str(error)
    if isinstance(error, MCPError):
        return f"MCPError {error.code}: {error}"
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(describe(e) for e in error.exceptions)
    last = traceback.extract_tb(error.__traceback__)[-1:] if error.__traceback__ else []
    where = f" at {last[0].filename.rsplit('/', 1)[-1]}:{last[0].lineno}" if last else ""
    return f"{type(error).__name__}: {error}{where}".replace("\n", " ")


async def check(name: str, fn: Callable[[], Awaitable[T]], timeout: float = 90) -> T | None:
    """Runs one check, bounded; prints one line; never raises."""
    global passed, failed
    try:
        with anyio.fail_after(timeout):
            value = await fn()
    except Exception as error:  # noqa: BLE001 - every failure is a reported check, not a crash
        failed += 1
        print(f"FAIL {name}: {describe(error)}", flush=True)
        return None
    passed += 1
    print(f"ok   {name}", flush=True)
    return value


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


def fields(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.split("\n"):
        match = re.match(r"^([a-z_]+): ?(.*)$", line)
        if match and match.group(1) not in out:
            out[match.group(1)] = match.group(2)
    return out


def make_client(transport: str, era: str, errlog: Any) -> Client:
    mode, _ = ERAS[era]
    if transport == "http":
        return Client(env("MCP_URL"), mode=mode, client_info=CLIENT_INFO, read_timeout_seconds=60)
    # As a host starts it: `agent-mcp stdio` in its own empty folder, only the fake's Ollama URL
    # and model set.
    params = StdioServerParameters(
        command=env("CLIENTS_SERVER_BIN"),
        args=["stdio"],
        cwd=tempfile.mkdtemp(prefix="stdio-", dir=env("CLIENTS_WORK")),
        env={"OLLAMA_HOST": env("OLLAMA_URL"), "AGENT_MCP_OLLAMA_MODEL": "test-model", "RUST_LOG": "warn"},
    )
    return Client(stdio_client(params, errlog=errlog), mode=mode, client_info=CLIENT_INFO, read_timeout_seconds=60)


async def run_task(client: Client, arguments: dict[str, Any], max_polls: int = 120) -> dict[str, str]:
    """agent_run, then agent_status every second (the advertised poll interval) to the end."""
    started = await client.call_tool("agent_run", arguments)
    expect(not started.is_error, f"agent_run isError: {text_of(started)}")
    run = fields(text_of(started))
    expect(bool(UUID.match(run.get("task_id", ""))), f"agent_run text has no task_id: {text_of(started)!r}")
    expect(bool(UUID.match(run.get("session_id", ""))), f"agent_run text has no session_id: {text_of(started)!r}")
    seen: list[str] = []
    for _ in range(max_polls):
        result = await client.call_tool("agent_status", {"task_id": run["task_id"]})
        expect(not result.is_error, f"agent_status isError: {text_of(result)}")
        status = fields(text_of(result))
        if not seen or seen[-1] != status.get("status"):
            seen.append(status.get("status", "?"))
        if status.get("status") in TERMINAL:
            status["states_seen"] = " -> ".join(seen)
            status["run_session_id"] = run["session_id"]
            return status
        await anyio.sleep(1)
    raise CheckFailed(f"task {run['task_id']} did not finish in {max_polls} polls; states {seen}")


async def one_combination(transport: str, era: str, errlog: Any) -> None:
    global failed
    tag = f"[{transport} {era}]"
    _, version = ERAS[era]

    async def negotiated(client: Client) -> bool:
        expect(client.protocol_version == version, f"negotiated {client.protocol_version}, expected {version}")
        expect(client.server_info is not None and client.server_info.name == "agent-mcp", f"server_info {client.server_info}")
        expect(client.server_capabilities.tools is not None, "no tools capability")
        return True

    connected = False
    try:
        # The client's task groups and this bound nest: the whole connection lives inside it.
        with anyio.fail_after(600):
            async with make_client(transport, era, errlog) as client:
                connected = True
                if await check(f"{tag} connect: negotiates {version}", lambda: negotiated(client)) is None:
                    return
                await checks(client, tag, transport)
    except Exception as error:  # noqa: BLE001 - reported as a failed check
        failed += 1
        what = "the connection broke" if connected else f"connect: negotiates {version}"
        print(f"FAIL {tag} {what}: {describe(error)}", flush=True)


async def checks(client: Client, tag: str, transport: str) -> None:
    async def schemas() -> None:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        expect(set(tools) == {"agent_run", "agent_status"}, f"tools {sorted(tools)}")
        run, status = tools["agent_run"], tools["agent_status"]
        for tool in (run, status):
            expect(bool(tool.description), f"{tool.name} has no description")
            expect(tool.input_schema.get("type") == "object", f"{tool.name} inputSchema.type")
            expect(tool.input_schema.get("additionalProperties") is False, f"{tool.name} allows unknown keys")
        expect(run.input_schema.get("required") == ["request"], f"agent_run required {run.input_schema.get('required')}")
        expect(
            set(run.input_schema["properties"]) == {"request", "session_id", "temperature", "images"},
            f"agent_run properties {sorted(run.input_schema['properties'])}",
        )
        expect(status.input_schema.get("required") == ["task_id"], f"agent_status required {status.input_schema.get('required')}")
        expect(status.input_schema["properties"]["task_id"].get("format") == "uuid", "agent_status task_id is not a uuid")
        a_run, a_status = run.annotations, status.annotations
        expect(a_run is not None and a_status is not None, "missing annotations")
        expect(
            (a_run.read_only_hint, a_run.destructive_hint, a_run.open_world_hint) == (False, True, False),
            f"agent_run annotations {a_run}",
        )
        expect(
            (a_status.read_only_hint, a_status.destructive_hint, a_status.open_world_hint) == (True, False, False),
            f"agent_status annotations {a_status}",
        )

    await check(f"{tag} tools/list: both tools, their input schemas and annotations", schemas)

    async def polled() -> dict[str, str]:
        status = await run_task(client, {"request": "Say hello."})
        expect(status.get("status") == "completed", f"ended {status.get('status')}: {status}")
        expect(status.get("result") == FAKE_REPLY, f"result {status.get('result')!r}")
        expect(status.get("completed_tasks") == "1/1", f"completed_tasks {status.get('completed_tasks')}")
        expect(status.get("token_usage", "").startswith("input="), f"token_usage {status.get('token_usage')!r}")
        return status

    first = await check(f"{tag} agent_run, then agent_status polled every 1 s to completed", polled)

    async def continued() -> None:
        expect(first is not None, "no first task")
        assert first is not None
        session = first["run_session_id"]
        status = await run_task(client, {"request": "And again.", "session_id": session})
        expect(status.get("status") == "completed", f"ended {status.get('status')}")
        expect(status.get("session_id") == session, f"session_id {status.get('session_id')}, expected {session}")

    await check(f"{tag} agent_run with session_id continues that session", continued)

    async def tool_error(arguments: dict[str, Any], name: str = "agent_run") -> None:
        result = await client.call_tool(name, arguments)
        expect(result.is_error is True, f"isError {result.is_error}: {text_of(result)!r}")
        expect(bool(text_of(result).strip()), "the tool error has no text")

    await check(f"{tag} agent_run with an empty request: a tool error (isError)", lambda: tool_error({"request": ""}))
    await check(
        f"{tag} agent_run with an unknown key: a tool error (isError)",
        lambda: tool_error({"request": "hi", "bogus": 1}),
    )
    await check(
        f"{tag} agent_run with temperature 7: a tool error (isError)",
        lambda: tool_error({"request": "hi", "temperature": 7}),
    )
    await check(
        f"{tag} agent_status with a malformed task_id: a tool error (isError)",
        lambda: tool_error({"task_id": "not-a-uuid"}, "agent_status"),
    )

    async def unknown_tool() -> None:
        try:
            result = await client.call_tool("no_such_tool", {})
        except MCPError as error:
            expect(error.code == -32602, f"code {error.code}: {error}")
        else:
            raise CheckFailed(f"no error: {result}")
        # The connection is still usable afterwards.
        tools = (await client.list_tools(cache_mode="refresh")).tools
        expect(len(tools) == 2, f"{len(tools)} tools after the error")

    await check(f"{tag} an unknown tool: JSON-RPC -32602, and the client carries on", unknown_tool)

    if transport == "stdio" and first is not None:
        # Over stdio there is one client, and it started the server: nothing to limit.
        async def burst() -> None:
            for i in range(500):
                result = await client.call_tool("agent_status", {"task_id": first["task_id"]})
                expect(not result.is_error, f"call {i + 1}: isError: {text_of(result)}")

        await check(f"{tag} 500 agent_status calls in a burst: none refused", burst)


async def polite_polling() -> None:
    """A polite client is never refused: three tasks polled at once, each every second (the
    advertised pollIntervalMs), for as long as they take (about 20 s each, one after another)."""
    tag = "[http 2026-07-28]"

    async def body() -> bool:
        async with Client(env("MCP_URL_SLOW"), mode="auto", client_info=CLIENT_INFO, read_timeout_seconds=60) as client:
            ended: dict[int, dict[str, str]] = {}

            async def one(i: int) -> None:
                ended[i] = await run_task(client, {"request": f"Polite task {i}."}, max_polls=240)

            async with anyio.create_task_group() as group:
                for i in range(3):
                    group.start_soon(one, i)
            for i, status in sorted(ended.items()):
                expect(status.get("status") == "completed", f"task {i + 1} ended {status.get('status')}")
        return True

    await check(
        f"{tag} three tasks polled at once with agent_status every 1 s until done (about 60 s): none refused",
        body,
        timeout=300,
    )


async def approvals_mrtr() -> None:
    """Approvals through MRTR: a server whose write_file asks, a model that writes two files;
    the client has the Python SDK's elicitation_callback (and no Tasks extension), so
    agent_status on the waiting task answers with an InputRequiredResult, which call_tool hands
    to the callback (accept the first, decline the second) and retries with inputResponses."""
    tag = "[http 2026-07-28]"
    if not os.environ.get("MCP_URL_APPROVALS_PY"):
        return
    asked: list[str] = []

    async def elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept" if len(asked) == 1 else "decline")

    async def body() -> bool:
        async with Client(
            env("MCP_URL_APPROVALS_PY"),
            mode="auto",
            client_info=CLIENT_INFO,
            read_timeout_seconds=60,
            elicitation_callback=elicit,
        ) as client:
            status = await run_task(client, {"request": "Say hello."}, max_polls=60)
            # The whole text: the result spans several lines (the decisions follow the answer).
            result = text_of(await client.call_tool("agent_status", {"task_id": status["task_id"]}))
        expect(status.get("status") == "completed", f"the task ended {status.get('status')}")
        expect(len(asked) == 2, f"{len(asked)} elicitations: {asked}")
        expect(all("write_file: " in m for m in asked), f"messages {asked}")
        expect("- approval-1 write_file (accepted.txt): accept" in result, result)
        expect("- approval-2 write_file (declined.txt): decline" in result, result)
        workspace = env("APPROVALS_PY_WORKSPACE")
        expect(os.path.exists(os.path.join(workspace, "accepted.txt")), "accepted.txt is missing")
        expect(not os.path.exists(os.path.join(workspace, "declined.txt")), "declined.txt was written")
        return True

    await check(
        f"{tag} approvals by MRTR: elicitation_callback accepts one write_file and declines the other",
        body,
        timeout=120,
    )


async def main() -> None:
    log_path = os.path.join(env("CLIENTS_WORK"), "python-stdio-servers.log")
    with open(log_path, "a", encoding="utf-8") as errlog:
        # The minute of polite polling runs beside the other checks (on a server of its own).
        async with anyio.create_task_group() as group:
            group.start_soon(polite_polling)
            for transport in ("http", "stdio"):
                for era in ERAS:
                    await one_combination(transport, era, errlog)
            await approvals_mrtr()
    print(f"{passed} passed, {failed} failed", flush=True)
    sys.exit(0 if failed == 0 else 1)


if __name__ == "__main__":
    anyio.run(main)
