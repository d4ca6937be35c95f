"""A real MCP client for tests/app/mcp.rs: the official Python SDK (PyPI `mcp`).

Reads a plan (JSON) on stdin, runs it against IncidentMind's /mcp and prints what it saw as
one JSON object on stdout; the Rust test asserts on it. The plan:

  {"url": ".../mcp", "token": "im_…", "calls": [{"name": …, "arguments": {…}}, …],
   "refused_tokens": ["im_wrong…", …],
   "bridge": {"command": "/path/to/incidentmind", "calls": [...]}}

For the HTTP session: initialize, list tools, every call in order. For each refused token: an
initialize that must fail. For the bridge: `incidentmind mcp --url URL --token TOKEN` started
over stdio by the SDK, initialize, list tools, its calls.
"""

import json
import sys

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

TIMEOUT_S = 60


def text_of(result):
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def session_run(session, calls):
    init = await session.initialize()
    listed = await session.list_tools()
    out = {
        "protocol_version": init.protocol_version,
        "server_name": init.server_info.name,
        "instructions": init.instructions or "",
        "tools": [
            {
                "name": t.name,
                "description": t.description or "",
                "input_schema": t.input_schema,
                "read_only": bool(t.annotations and t.annotations.read_only_hint),
            }
            for t in listed.tools
        ],
        "calls": [],
    }
    for call in calls:
        result = await session.call_tool(call["name"], call.get("arguments") or {})
        out["calls"].append(
            {"name": call["name"], "is_error": bool(result.is_error), "text": text_of(result)}
        )
    return out


async def over_http(url, token, calls):
    headers = {"Authorization": f"Bearer {token}"}
    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                return await session_run(session, calls)


async def refused(url, token):
    try:
        with anyio.fail_after(TIMEOUT_S):
            await over_http(url, token, [])
    except BaseException as e:  # the SDK raises an error group or an McpError
        return {"refused": True, "error": repr(e)}
    return {"refused": False, "error": ""}


async def over_stdio(command, url, token, calls):
    params = StdioServerParameters(command=command, args=["mcp", "--url", url, "--token", token])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            return await session_run(session, calls)


async def main():
    plan = json.load(sys.stdin)
    out = {}
    with anyio.fail_after(TIMEOUT_S * 3):
        out["http"] = await over_http(plan["url"], plan["token"], plan["calls"])
    out["refused"] = [await refused(plan["url"], t) for t in plan.get("refused_tokens", [])]
    bridge = plan.get("bridge")
    if bridge:
        with anyio.fail_after(TIMEOUT_S * 3):
            out["bridge"] = await over_stdio(
                bridge["command"], plan["url"], plan["token"], bridge["calls"]
            )
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    anyio.run(main)
