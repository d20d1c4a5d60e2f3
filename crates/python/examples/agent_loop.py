"""An agent loop over ctxlog, against a stand-in model (no network).

Each step projects the exact request body for the budget, "calls the model" (a plain
function that reads the body as a provider would), commits what the model produced (a tool
call, then the tool's result, or the final reply), and projects again. The model may call
ctxlog's own recall tool to find what a narrow body left out; the agent answers that call in
one line with ``chat.answer_recall_tool``.

Run: ``python agent_loop.py [--format openai-chat|anthropic-messages] [--root DIR]``.
"""

import argparse
import json
import tempfile
from typing import Any, Dict, List, Optional, Tuple

import ctxlog

FORMATS: Dict[str, ctxlog.WireFormat] = {
    "openai-chat": "openai-chat",
    "anthropic-messages": "anthropic-messages",
}

Item = Tuple[str, Any]  # ("user"|"assistant"|"tool_call"|"tool_result", payload)
Reply = Dict[str, Any]  # {"text": str} or {"tool": str, "arguments": dict}


def shell_tool(format: ctxlog.WireFormat) -> Dict[str, Any]:
    """A made-up `shell` tool's definition in the format's tool shape."""
    schema = {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}
    description = "Run a shell command in the project directory."
    if format == "anthropic-messages":
        return {"name": "shell", "description": description, "input_schema": schema}
    return {
        "type": "function",
        "function": {"name": "shell", "description": description, "parameters": schema},
    }


def transcript(body: Dict[str, Any]) -> List[Item]:
    """What the model reads, in order, from either wire format."""
    items: List[Item] = []
    for message in body["messages"]:
        role, content = message["role"], message.get("content")
        if role == "tool":
            items.append(("tool_result", content))
            continue
        for call in message.get("tool_calls", []):
            items.append(("tool_call", call["function"]["name"]))
        if isinstance(content, str):
            items.append((role, content))
            continue
        for block in content or []:
            if block["type"] == "text":
                items.append((role, block["text"]))
            elif block["type"] == "tool_use":
                items.append(("tool_call", block["name"]))
            elif block["type"] == "tool_result":
                items.append(("tool_result", block["content"]))
    return items


def stand_in_model(body: Dict[str, Any]) -> Reply:
    """Answers from what the body holds; calls a tool when it lacks something."""
    items = transcript(body)
    asked = max(i for i, (kind, _) in enumerate(items) if kind == "user")
    question = items[asked][1]
    results = [text for kind, text in items[asked:] if kind == "tool_result"]
    if results:
        return {"text": f"From the tool: {results[-1]}"}
    everything = " ".join(str(text) for _, text in items)
    if "files" in question:
        return {"tool": "shell", "arguments": {"cmd": "ls"}}
    if "project code" in question and "ZX-81" not in everything[: len(everything) - len(question)]:
        return {"tool": "recall", "arguments": {"query": "project code"}}
    return {"text": f"You asked: {question}"}


def run_tool(chat: ctxlog.Conversation, tool: str, arguments: Dict[str, Any]) -> str:
    if tool == "recall":
        return chat.answer_recall_tool(arguments)
    return "a.txt b.txt README.md"  # a stand-in for running `arguments["cmd"]`


def ask(
    chat: ctxlog.Conversation,
    question: str,
    format: ctxlog.WireFormat,
    max_bytes: int,
    max_steps: int = 5,
) -> Tuple[str, List[Dict[str, Any]]]:
    """One user turn of the agent loop. Returns the final reply and each step's report."""
    reports: List[Dict[str, Any]] = []
    pending: List[Dict[str, Any]] = [{"kind": "user", "text": question}]
    # The first request carries the question; after a tool result the next one has no input:
    # the open turn (question, call, result) is the request (docs/design.md#p11-the-agent-loop).
    request_input: Optional[str] = question
    for step in range(max_steps):
        body, report = chat.project_dict(
            input=request_input,
            format=format,
            max_bytes=max_bytes,
            tools=[shell_tool(format)],
            recall_tool=True,
        )
        reports.append(report)
        reply = stand_in_model(body)
        if "text" in reply:
            chat.commit(events=pending + [{"kind": "assistant", "text": reply["text"]}])
            return reply["text"], reports
        call_id = f"call-{len(chat.log()) + len(pending)}"
        call = {"kind": "tool_call", "call_id": call_id, "tool": reply["tool"],
                "arguments": reply["arguments"]}
        chat.commit(events=pending + [call])
        result = run_tool(chat, reply["tool"], reply["arguments"])
        chat.commit(events=[{"kind": "tool_result", "call_id": call_id, "tool": reply["tool"],
                             "status": "ok", "text": result}])
        pending, request_input = [], None
    raise RuntimeError(f"no final reply after {max_steps} steps")


def main(root: str, format: ctxlog.WireFormat, max_bytes: int = 2500) -> List[str]:
    answers: List[str] = []
    with ctxlog.Store(root) as store:
        chat = store.conversation("agent")
        chat.commit(user="My project code is ZX-81.", assistant="Noted: ZX-81.")
        for i in range(20):
            chat.commit(user=f"Small talk {i}: how is the weather?", assistant=f"Fine, {i}.")
        for question in ["Which files are in the project?", "What is my project code?"]:
            answer, reports = ask(chat, question, format, max_bytes)
            sizes = [r["bytes"] for r in reports]
            print(f"{question!r} -> {answer[:70]!r} ({len(reports)} requests, bytes {sizes})")
            answers.append(answer)
    return answers


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--format", default="openai-chat", choices=FORMATS)
    parser.add_argument("--root", default=None)
    args = parser.parse_args()
    root: Optional[str] = args.root
    if root is None:
        root = tempfile.mkdtemp(prefix="ctxlog-agent-")
    answers = main(root, FORMATS[args.format])
    print(json.dumps({"answers": answers}, ensure_ascii=False))
