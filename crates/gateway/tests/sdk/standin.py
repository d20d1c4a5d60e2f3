"""A stand-in provider on loopback for the gateway's tests: it serves OpenAI's
`/v1/chat/completions` and `/v1/responses` and Anthropic's `/v1/messages`, plain and
streaming, answering each call with the reply a test scripted, and it checks every request
it receives: the body is a valid request by the SDKs' own request types (a Responses body
also by the published Responses schema the repository keeps), it fits the window the test
gave the gateway (counted by `ctxlog count`), and it carries the client's API key."""

import json
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pydantic
from anthropic.types.message_create_params import (
    MessageCreateParamsNonStreaming,
    MessageCreateParamsStreaming,
)
from openai.types.chat.completion_create_params import (
    CompletionCreateParamsNonStreaming,
    CompletionCreateParamsStreaming,
)
from openai.types.responses.response_create_params import (
    ResponseCreateParamsNonStreaming,
    ResponseCreateParamsStreaming,
)

OPENAI_PLAIN: "pydantic.TypeAdapter[CompletionCreateParamsNonStreaming]" = pydantic.TypeAdapter(
    CompletionCreateParamsNonStreaming
)
OPENAI_STREAM: "pydantic.TypeAdapter[CompletionCreateParamsStreaming]" = pydantic.TypeAdapter(
    CompletionCreateParamsStreaming
)
ANTHROPIC_PLAIN: "pydantic.TypeAdapter[MessageCreateParamsNonStreaming]" = pydantic.TypeAdapter(
    MessageCreateParamsNonStreaming
)
ANTHROPIC_STREAM: "pydantic.TypeAdapter[MessageCreateParamsStreaming]" = pydantic.TypeAdapter(
    MessageCreateParamsStreaming
)

RESPONSES_PLAIN: "pydantic.TypeAdapter[ResponseCreateParamsNonStreaming]" = pydantic.TypeAdapter(
    ResponseCreateParamsNonStreaming
)
RESPONSES_STREAM: "pydantic.TypeAdapter[ResponseCreateParamsStreaming]" = pydantic.TypeAdapter(
    ResponseCreateParamsStreaming
)
#: OpenAI's published schema of a Responses request body (crates/projection/tests/fixtures).
RESPONSES_SCHEMA: Dict[str, Any] = json.loads(
    (
        Path(__file__).resolve().parents[3]
        / "projection/tests/fixtures/openai-responses/create-response.schema.json"
    ).read_text()
)

Reply = Dict[str, Any]


def text_reply(text: str) -> Reply:
    return {"text": text, "calls": []}


def call_reply(call_id: str, tool: str, arguments: Dict[str, Any], thought: Optional[str] = None) -> Reply:
    """A tool call; with `thought`, after a reasoning item (Responses, with its
    `encrypted_content`) or a thinking block (Anthropic, with its signature)."""
    return {"text": None, "calls": [(call_id, tool, arguments)], "thought": thought}


def thinking_block(thought: str) -> Dict[str, Any]:
    return {"type": "thinking", "thinking": thought, "signature": f"sig-{len(thought)}-EqQkCAYYAiJA"}


def reasoning_item(thought: str) -> Dict[str, Any]:
    return {
        "type": "reasoning", "id": "rs_standin", "summary": [{"type": "summary_text", "text": thought}],
        "encrypted_content": f"gAAAAAB-{len(thought)}-opaque",
    }


class StandIn:
    """The provider. `replies` is the queue of scripted replies; `fail` answers the next call
    with a status and body instead; `requests` holds every body received."""

    def __init__(self, ctxlog_bin: Path, window: int) -> None:
        self.ctxlog_bin = ctxlog_bin
        self.window = window
        self.replies: List[Reply] = []
        self.fail: Optional[Tuple[int, Dict[str, Any]]] = None
        self.requests: List[Dict[str, Any]] = []
        self.problems: List[str] = []
        self.stream_pause = 0.0
        self.cancelled = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def check(self, path: str, headers: Dict[str, str], body: Dict[str, Any]) -> None:
        """Every request: the SDK's request type, the window, the key."""
        stream = body.get("stream") is True
        try:
            if path == "/v1/chat/completions":
                (OPENAI_STREAM if stream else OPENAI_PLAIN).validate_python(body)
            elif path == "/v1/responses":
                (RESPONSES_STREAM if stream else RESPONSES_PLAIN).validate_python(body)
                self.check_schema(body)
            else:
                (ANTHROPIC_STREAM if stream else ANTHROPIC_PLAIN).validate_python(body)
        except pydantic.ValidationError as e:
            self.problems.append(f"not a valid SDK request: {e}")
        if "authorization" not in headers and "x-api-key" not in headers:
            self.problems.append("the client's API key was not forwarded")
        if any(k.startswith("x-ctxlog-") for k in headers):
            self.problems.append("a ctxlog header reached the provider")
        fmt = {"/v1/chat/completions": "openai-chat", "/v1/responses": "openai-responses"}.get(
            path, "anthropic-messages"
        )
        counted = subprocess.run(
            [str(self.ctxlog_bin), "count", "--format", fmt, "--json", "-"],
            input=json.dumps(body, ensure_ascii=False).encode(),
            capture_output=True,
            check=True,
        )
        tokens = int(json.loads(counted.stdout)["tokens"])
        output = int(
            body.get("max_tokens") or body.get("max_completion_tokens") or body.get("max_output_tokens") or 0
        )
        if tokens + output > self.window:
            self.problems.append(f"{tokens} + {output} tokens exceed the window {self.window}")

    def check_schema(self, body: Dict[str, Any]) -> None:
        """A Responses body against the published schema."""
        import jsonschema  # type: ignore[import-untyped]

        for error in jsonschema.Draft202012Validator(RESPONSES_SCHEMA).iter_errors(body):
            self.problems.append(f"not a valid Responses request: {error.message}")

    def handler(self) -> type:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # Without it each kept-alive response stalls on a delayed ACK.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers["content-length"]))
                body: Dict[str, Any] = json.loads(raw)
                headers = {k.lower(): v for k, v in self.headers.items()}
                standin.requests.append(body)
                standin.check(self.path, headers, body)
                if standin.fail is not None:
                    status, error = standin.fail
                    standin.fail = None
                    self.send_json(status, error)
                    return
                reply = standin.replies.pop(0) if standin.replies else text_reply("(none)")
                anthropic = self.path == "/v1/messages"
                if self.path == "/v1/responses":
                    if body.get("stream") is True:
                        self.send_stream(responses_events(reply))
                    else:
                        self.send_json(200, responses_object(reply))
                elif body.get("stream") is True:
                    events = anthropic_events(reply) if anthropic else openai_chunks(reply)
                    self.send_stream(events)
                else:
                    self.send_json(200, anthropic_message(reply) if anthropic else openai_completion(reply))

            def send_json(self, status: int, value: Dict[str, Any]) -> None:
                data = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("x-request-id", "req_standin")
                self.end_headers()
                self.wfile.write(data)

            def send_stream(self, events: List[bytes]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                try:
                    for event in events:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                        self.wfile.flush()
                        time.sleep(standin.stream_pause)
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    standin.cancelled.set()

        return Handler


def openai_completion(reply: Reply) -> Dict[str, Any]:
    message: Dict[str, Any] = {"role": "assistant", "content": reply["text"]}
    if reply["calls"]:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, n, a in reply["calls"]
        ]
    return {
        "id": "chatcmpl-standin",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if reply["calls"] else "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def sse(value: Any, event: Optional[str] = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    data = value if isinstance(value, str) else json.dumps(value)
    return f"{head}data: {data}\n\n".encode()


def openai_chunks(reply: Reply) -> List[bytes]:
    def chunk(delta: Dict[str, Any], finish: Optional[str] = None) -> bytes:
        return sse(
            {
                "id": "chatcmpl-standin",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "gpt-4o",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )

    out = [chunk({"role": "assistant", "content": ""})]
    text = reply["text"] or ""
    for i in range(0, len(text), 5):
        out.append(chunk({"content": text[i : i + 5]}))
    for index, (call_id, name, arguments) in enumerate(reply["calls"]):
        args = json.dumps(arguments)
        half = len(args) // 2
        first = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": args[:half]}}
        out.append(chunk({"tool_calls": [first]}))
        out.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": args[half:]}}]}))
    out.append(chunk({}, "tool_calls" if reply["calls"] else "stop"))
    out.append(sse("[DONE]"))
    return out


def anthropic_blocks(reply: Reply) -> List[Dict[str, Any]]:
    blocks: List[Dict[str, Any]] = []
    if reply.get("thought"):
        blocks.append(thinking_block(reply["thought"]))
    if reply["text"]:
        cited = {"citations": reply["citations"]} if reply.get("citations") else {}
        blocks.append({"type": "text", "text": reply["text"], **cited})
    for call_id, name, arguments in reply["calls"]:
        blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": arguments})
    return blocks


def anthropic_message(reply: Reply) -> Dict[str, Any]:
    return {
        "id": "msg_standin",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": anthropic_blocks(reply),
        "stop_reason": "tool_use" if reply["calls"] else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


def anthropic_events(reply: Reply) -> List[bytes]:
    start = {**anthropic_message(reply), "content": [], "stop_reason": None}
    out = [sse({"type": "message_start", "message": start}, "message_start")]
    for index, block in enumerate(anthropic_blocks(reply)):
        first: Dict[str, Any]
        if block["type"] == "thinking":
            first = {"type": "thinking", "thinking": "", "signature": ""}
            thought = block["thinking"]
            deltas = [{"type": "thinking_delta", "thinking": thought[i : i + 5]} for i in range(0, len(thought), 5)]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif block["type"] == "text":
            first = {"type": "text", "text": ""}
            text = block["text"]
            deltas = [{"type": "citations_delta", "citation": c} for c in block.get("citations", [])]
            deltas += [{"type": "text_delta", "text": text[i : i + 5]} for i in range(0, len(text), 5)]
        else:
            first = {**block, "input": {}}
            args = json.dumps(block["input"])
            half = len(args) // 2
            deltas = [
                {"type": "input_json_delta", "partial_json": args[:half]},
                {"type": "input_json_delta", "partial_json": args[half:]},
            ]
        out.append(sse({"type": "content_block_start", "index": index, "content_block": first}, "content_block_start"))
        for delta in deltas:
            out.append(sse({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta"))
        out.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    stop = "tool_use" if reply["calls"] else "end_turn"
    out.append(
        sse(
            {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 1}},
            "message_delta",
        )
    )
    out.append(sse({"type": "message_stop"}, "message_stop"))
    return out


def responses_items(reply: Reply) -> List[Dict[str, Any]]:
    items: List[Dict[str, Any]] = []
    if reply.get("thought"):
        items.append(reasoning_item(reply["thought"]))
    if reply["text"]:
        part = {"type": "output_text", "text": reply["text"], "annotations": [], "logprobs": []}
        items.append({"type": "message", "id": "msg_standin", "status": "completed", "role": "assistant", "content": [part]})
    for index, (call_id, name, arguments) in enumerate(reply["calls"]):
        items.append(
            {"type": "function_call", "id": f"fc_{index}", "call_id": call_id, "name": name,
             "arguments": json.dumps(arguments), "status": "completed"}
        )
    return items


def responses_object(reply: Reply, status: str = "completed") -> Dict[str, Any]:
    return {
        "id": "resp_standin",
        "object": "response",
        "created_at": 1,
        "status": status,
        "model": "gpt-4o",
        "output": responses_items(reply) if status == "completed" else [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
                  "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
    }


def responses_events(reply: Reply) -> List[bytes]:
    seq = iter(range(1000))

    def event(kind: str, value: Dict[str, Any]) -> bytes:
        return sse({"type": kind, "sequence_number": next(seq), **value}, kind)

    out = [event("response.created", {"response": responses_object(reply, "in_progress")})]
    for index, item in enumerate(responses_items(reply)):
        if item["type"] == "reasoning":
            out.append(event("response.output_item.added", {"output_index": index, "item": {**item, "summary": []}}))
        elif item["type"] == "message":
            text = item["content"][0]["text"]
            out.append(event("response.output_item.added", {"output_index": index, "item": {**item, "content": [], "status": "in_progress"}}))
            for i in range(0, len(text), 5):
                out.append(event("response.output_text.delta", {"item_id": item["id"], "output_index": index, "content_index": 0, "delta": text[i : i + 5], "logprobs": []}))
        else:
            out.append(event("response.output_item.added", {"output_index": index, "item": {**item, "arguments": "", "status": "in_progress"}}))
            args = item["arguments"]
            half = len(args) // 2
            for piece in (args[:half], args[half:]):
                out.append(event("response.function_call_arguments.delta", {"item_id": item["id"], "output_index": index, "delta": piece}))
        out.append(event("response.output_item.done", {"output_index": index, "item": item}))
    out.append(event("response.completed", {"response": responses_object(reply)}))
    return out
