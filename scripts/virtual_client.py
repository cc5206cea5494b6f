#!/usr/bin/env python3
"""Drive a Toolshed virtual server with the independent Python `mcp` SDK.

Usage:
  virtual_client.py COMMAND DIRECT_COMMAND

COMMAND starts `toolshed serve --stdio --server NAME` for a virtual server with the reference
server-everything behind it (original names, its tools, resources and prompts); DIRECT_COMMAND
starts server-everything itself. Both are run over stdio. Checks: the resource and prompt lists
through Toolshed equal the upstream's own; a resource read and a prompt with arguments answer as
the upstream does; a tool call with a progress callback gets the upstream's progress reports.
Then, for a client of the 2025 revisions (`legacy`) and one of 2026-07-28 (`auto`): the
upstream's elicitation and sampling reach the client (the 2026-07-28 one through
`input_required`), completion of a prompt argument passes through; the legacy client's resource
subscription receives the upstream's `notifications/resources/updated`.
Prints `PASS ...` and exits 0, or `FAIL ...` naming the step and exits 1.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
from mcp import Client, StdioServerParameters, types
from mcp.client.stdio import stdio_client

TIMEOUT_S = float(os.environ.get("INTEROP_CLIENT_TIMEOUT", "60"))


class Mismatch(Exception):
    pass


def check(ok: bool, what: str) -> None:
    if not ok:
        raise Mismatch(what)


def dump(items: list[Any], key: str) -> list[dict]:
    return sorted((i.model_dump(by_alias=True, exclude_none=True) for i in items), key=lambda d: d[key])


def connect(command: str) -> Any:
    params = StdioServerParameters(command=command, args=["stdio"] if command.endswith("everything") else [])
    return stdio_client(params, errlog=open(os.devnull, "w"))


async def scenario(through: Client, direct: Client) -> None:
    a, b = await through.list_resources(), await direct.list_resources()
    check(dump(a.resources, "uri") == dump(b.resources, "uri"), "resources/list differs from the upstream's")
    a, b = await through.list_prompts(), await direct.list_prompts()
    check(dump(a.prompts, "name") == dump(b.prompts, "name"), "prompts/list differs from the upstream's")
    uri = "demo://resource/static/document/architecture.md"
    a, b = await through.read_resource(uri), await direct.read_resource(uri)
    check(a.model_dump() == b.model_dump(), "resources/read differs from the upstream's")
    a = await through.get_prompt("args-prompt", {"city": "Lisbon"})
    b = await direct.get_prompt("args-prompt", {"city": "Lisbon"})
    check(a.model_dump() == b.model_dump() and "Lisbon" in str(a.model_dump()), "prompts/get differs")
    seen: list[float] = []

    async def progress(p: float, total: float | None, message: str | None) -> None:
        seen.append(p)

    r = await through.call_tool(
        "trigger-long-running-operation", {"duration": 1, "steps": 3}, progress_callback=progress
    )
    check(not r.is_error, f"long-running operation failed: {r}")
    for _ in range(50):
        if len(seen) >= 3:
            break
        await anyio.sleep(0.02)
    check(len(seen) >= 3 and seen == sorted(seen), f"progress through Toolshed: {seen}")


ARCHITECTURE = "demo://resource/static/document/architecture.md"


class Human:
    """Answers the upstream's questions the way a person at the client would, and notes them."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.updated: list[str] = []

    async def elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append("elicitation")
        return types.ElicitResult(action="accept", content={"name": "Ada Lovelace", "check": True})

    async def sample(self, context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.asked.append("sampling")
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="forty-two"), model="scripted"
        )

    async def message(self, message: Any) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, types.ResourceUpdatedNotification):
            self.updated.append(root.params.uri)


async def questions(command: str, mode: str) -> None:
    """Elicitation, sampling, completion (and for `legacy`, a subscription) through Toolshed."""
    human = Human()
    async with Client(
        connect(command),
        mode=mode,
        elicitation_callback=human.elicit,
        sampling_callback=human.sample,
        message_handler=human.message,
    ) as client:
        r = await client.call_tool("trigger-elicitation-request", {})
        check(not r.is_error and "Ada Lovelace" in str(r.model_dump()), f"{mode}: elicitation result {r}")
        r = await client.call_tool("trigger-sampling-request", {"prompt": "six times seven?"})
        check(not r.is_error and "forty-two" in str(r.model_dump()), f"{mode}: sampling result {r}")
        check(human.asked == ["elicitation", "sampling"], f"{mode}: the client was asked {human.asked}")
        done = await client.complete(
            types.PromptReference(type="ref/prompt", name="completable-prompt"), {"name": "department", "value": "E"}
        )
        check(done.completion.values == ["Engineering"], f"{mode}: completion {done}")
        if mode != "legacy":
            return
        await client.subscribe_resource(ARCHITECTURE)
        await client.call_tool("toggle-subscriber-updates", {})
        with anyio.move_on_after(12):
            while ARCHITECTURE not in human.updated:
                await anyio.sleep(0.05)
        check(ARCHITECTURE in human.updated, f"no resource update arrived: {human.updated}")
        await client.unsubscribe_resource(ARCHITECTURE)


async def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    try:
        with anyio.fail_after(TIMEOUT_S):
            async with Client(connect(sys.argv[1])) as through, Client(connect(sys.argv[2])) as direct:
                await scenario(through, direct)
            await questions(sys.argv[1], "legacy")
            await questions(sys.argv[1], "auto")
    except BaseException as e:  # noqa: BLE001 - any SDK or transport error is a failure line
        if isinstance(e, KeyboardInterrupt):
            raise
        while isinstance(e, BaseExceptionGroup) and e.exceptions:
            e = e.exceptions[0]
        print(f"FAIL python-sdk virtual server: {type(e).__name__}: {e}")
        return 1
    print(
        "PASS python-sdk virtual server: resources, prompts and progress as the upstream's own; "
        "elicitation, sampling and completion for 2025 and 2026-07-28 clients; a subscription's update"
    )
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
