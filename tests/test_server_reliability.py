"""`xlalint server` under load and malformed traffic, driven over stdio with raw JSON-RPC:
linting runs off the message loop (shutdown and exit are answered while a big document
is linted), the newest version of a document wins, the CLI's size limit applies, and
every request gets an answer, never a traceback."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from lint_stand_in import COMMAND

from xlalint.engine.source import MAX_BYTES

ROOT = Path(__file__).resolve().parents[1]
# About 40 bytes a function: a document of many of them takes seconds to lint.
FUNCTION = "def step{}(x):\n    return x.cuda()\n"


def code(size: int) -> str:
    parts, total, n = ["import torch\n"], 0, 0
    while total < size:
        parts.append(FUNCTION.format(n))
        total += len(parts[-1])
        n += 1
    return "".join(parts)


class Server:
    """`xlalint server` as a child process, spoken to in raw JSON-RPC."""

    def __init__(
        self, cwd: Path, command: tuple[str, ...] = ("-m", "xlalint.cli", "server"), initialize: bool = True
    ) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.process = subprocess.Popen(
            [sys.executable, *command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
        )
        self.received: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        if initialize:
            self.initialize(cwd)

    def initialize(self, cwd: Path) -> None:
        self.request("initialize", {"capabilities": {}, "rootUri": cwd.as_uri()}, id=0)
        assert "result" in self.answer(0)
        self.notify("initialized", {})

    def _read(self) -> None:
        out = self.process.stdout
        assert out is not None
        while True:
            length = 0
            while (line := out.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if not line:
                self.received.put(None)
                return
            self.received.put(json.loads(out.read(length)))

    def send(self, message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.send_raw(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    def send_raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def request(self, method: str, params=None, *, id: int) -> None:
        self.send({"id": id, "method": method, **({} if params is None else {"params": params})})

    def notify(self, method: str, params: dict) -> None:
        self.send({"method": method, "params": params})

    def next(self, wanted, timeout: float) -> dict:
        """The next message ``wanted(message)`` accepts, within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                message = self.received.get(timeout=left)
            except queue.Empty:
                break
            assert message is not None, "the server closed its output"
            if wanted(message):
                return message
        raise AssertionError(f"nothing within {timeout} s")

    def answer(self, id: int, timeout: float = 60) -> dict:
        return self.next(lambda m: m.get("id") == id and "method" not in m, timeout)

    def diagnostics(self, uri: str, timeout: float = 60) -> dict:
        return self.next(
            lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri, timeout
        )["params"]

    def open(self, uri: str, text: str, version: int = 1) -> None:
        item = {"uri": uri, "languageId": "python", "version": version, "text": text}
        self.notify("textDocument/didOpen", {"textDocument": item})

    def change(self, uri: str, text: str, version: int) -> None:
        self.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]},
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


@pytest.fixture
def server(tmp_path):
    running = Server(tmp_path)
    yield running
    running.stop()


def code_action_params(uri: str) -> dict:
    zero = {"line": 0, "character": 0}
    return {"textDocument": {"uri": uri}, "range": {"start": zero, "end": zero}, "context": {"diagnostics": []}}


def test_shutdown_and_exit_are_answered_while_a_big_document_is_linted(server, tmp_path):
    server.open((tmp_path / "big.py").as_uri(), code(MAX_BYTES // 2))  # tens of seconds of linting
    time.sleep(1)  # the lint is under way
    started = time.monotonic()
    server.request("shutdown", id=1)
    assert server.answer(1, timeout=10) == {"jsonrpc": "2.0", "id": 1, "result": None}
    server.notify("exit", {})
    assert server.process.wait(timeout=20) == 0
    assert time.monotonic() - started < 25


def test_the_newest_version_wins_and_stale_results_are_never_published(server, tmp_path):
    uri = (tmp_path / "train.py").as_uri()
    server.open(uri, code(300_000))  # version 1 takes a while...
    server.change(uri, "import torch\nx = torch.ones(2).cuda()\n", version=2)  # ...and is outdated at once
    server.change(uri, "import torch\ny = 1\nx = torch.ones(2).cuda()\n", version=3)
    published = server.diagnostics(uri, timeout=120)
    assert published["version"] == 3
    assert [(d["code"], d["range"]["start"]["line"]) for d in published["diagnostics"]] == [("XLA104", 2)]
    # The server is answering, and nothing for version 1 or 2 comes after version 3.
    server.request("shutdown", id=1)
    server.answer(1, timeout=30)
    while not server.received.empty():
        message = server.received.get()
        assert message is None or message.get("method") != "textDocument/publishDiagnostics", message


def test_a_document_over_the_size_limit_is_not_linted_and_says_why(server, tmp_path):
    uri = (tmp_path / "huge.py").as_uri()
    server.open(uri, code(MAX_BYTES + 1024))
    published = server.diagnostics(uri, timeout=60)
    [note] = published["diagnostics"]
    assert note["message"].startswith("xlalint: not checked: file is too large to check (")
    assert "the limit is 8 MiB" in note["message"] and note["severity"] == 3  # information
    server.request("shutdown", id=1)
    server.answer(1, timeout=10)


def test_every_request_gets_an_error_answer_without_a_traceback(server, tmp_path):
    server.request("textDocument/codeAction", id=1)  # no params
    server.send({"id": 2, "method": "textDocument/codeAction", "params": {"textDocument": 3}})  # wrong shape
    server.request("textDocument/codeAction", code_action_params((tmp_path / "never.py").as_uri()), id=3)
    (tmp_path / "on_disk.py").write_text("import torch\nx = torch.ones(2).cuda()\n")
    server.request("textDocument/codeAction", code_action_params((tmp_path / "on_disk.py").as_uri()), id=4)
    errors = {id: server.answer(id, timeout=30)["error"] for id in (1, 2, 3, 4)}
    assert {id: error["code"] for id, error in errors.items()} == {1: -32602, 2: -32602, 3: -32602, 4: -32602}
    assert "no params" in errors[1]["message"] and "not open" in errors[3]["message"]
    assert all("data" not in error for error in errors.values()), errors
    server.request("shutdown", id=5)
    server.answer(5, timeout=10)
    server.request("textDocument/codeAction", code_action_params((tmp_path / "on_disk.py").as_uri()), id=6)
    assert server.answer(6, timeout=10)["error"]["code"] == -32600  # after shutdown: InvalidRequest
    server.notify("exit", {})
    assert server.process.wait(timeout=20) == 0


@pytest.fixture
def slow_server(tmp_path):
    """The server with ``lint_stand_in``: a document with ``# hold: PATH`` is linted once PATH exists."""
    running = Server(tmp_path, ("-c", COMMAND))
    yield running
    running.stop()


FINDS_ONE = "import torch\nx = torch.ones(2).cuda()\n"


def wait_for(path: Path, seconds: float = 60) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and (text := path.read_text()):
            return text
        time.sleep(0.05)
    raise AssertionError(f"{path} was not written within {seconds} s")


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_a_long_lint_of_one_document_holds_up_no_other(slow_server, tmp_path):
    # Issue 29: with a 4,000-line document open, every other document waited 30 s.
    gate, held, other = tmp_path / "gate", (tmp_path / "held.py").as_uri(), (tmp_path / "other.py").as_uri()
    slow_server.open(held, f"# hold: {gate}\n{FINDS_ONE}")
    wait_for(tmp_path / "gate.pid")  # its lint is under way, and does not end
    slow_server.open(other, FINDS_ONE)
    published = slow_server.next(lambda m: m.get("method") == "textDocument/publishDiagnostics", timeout=60)
    assert published["params"]["uri"] == other  # first: the held document's lint is still under way
    assert [d["code"] for d in published["params"]["diagnostics"]] == ["XLA104"]
    gate.touch()
    assert [d["code"] for d in slow_server.diagnostics(held)["diagnostics"]] == ["XLA104"]


def test_a_newer_version_cancels_the_outdated_lint_under_way(slow_server, tmp_path):
    gate, uri = tmp_path / "gate", (tmp_path / "train.py").as_uri()
    slow_server.open(uri, f"# hold: {gate}\n{FINDS_ONE}")
    outdated = int(wait_for(tmp_path / "gate.pid"))
    slow_server.change(uri, "import torch\ny = 1\n" + FINDS_ONE.split("\n", 1)[1], version=2)
    published = slow_server.diagnostics(uri, timeout=60)  # not held up by version 1's lint
    assert published["version"] == 2
    assert [(d["code"], d["range"]["start"]["line"]) for d in published["diagnostics"]] == [("XLA104", 2)]
    deadline = time.monotonic() + 10
    while alive(outdated) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(outdated), "the outdated lint still runs"
    gate.touch()
    slow_server.request("shutdown", id=1)
    slow_server.answer(1, timeout=30)
    while not slow_server.received.empty():
        message = slow_server.received.get()
        assert message is None or message.get("method") != "textDocument/publishDiagnostics", message


def peak_memory(pid: int) -> int:
    """The process's peak resident memory, in bytes (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_a_message_longer_than_the_limit_is_skipped_with_an_error(server, tmp_path):
    # Issue 29: `Content-Length: 99999999999` was a MemoryError that killed the server.
    # A message over the limit is skipped unread, a chunk at a time, and answered with
    # an error (id null: its id is in what was not read); the next message is served.
    padding = b" " * (65 * 2**20)
    body = b'{"jsonrpc": "2.0", "id": 7, "method": "shutdown", "x": "' + padding + b'"}'
    server.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    error = server.next(lambda m: "error" in m, timeout=60)
    assert error["id"] is None and error["error"]["code"] == -32600
    assert f"a message of {len(body)} bytes is over the limit of 64 MiB" in error["error"]["message"]
    uri = (tmp_path / "train.py").as_uri()
    server.open(uri, FINDS_ONE)
    assert [d["code"] for d in server.diagnostics(uri)["diagnostics"]] == ["XLA104"]
    assert peak_memory(server.process.pid) < 200 * 2**20  # never the 65 MiB message (and its parse) at once


def test_a_header_claiming_a_huge_message_is_answered_and_the_server_lives(server):
    server.send_raw(b"Content-Length: 99999999999\r\n\r\n{}")
    error = server.next(lambda m: "error" in m, timeout=30)
    assert error["id"] is None and "a message of 99999999999 bytes is over the limit" in error["error"]["message"]
    time.sleep(1)
    assert server.process.poll() is None, "the server died"
    assert peak_memory(server.process.pid) < 200 * 2**20


def test_a_request_before_initialize_gets_server_not_initialized(tmp_path):
    server = Server(tmp_path, initialize=False)
    try:
        uri = (tmp_path / "train.py").as_uri()
        server.open(uri, FINDS_ONE)  # a notification before initialize: dropped
        server.request("textDocument/codeAction", code_action_params(uri), id=1)
        server.request("shutdown", id=2)
        for id in (1, 2):
            error = server.answer(id, timeout=30)["error"]
            assert error["code"] == -32002 and "not initialized" in error["message"], error
        server.initialize(tmp_path)
        server.request("textDocument/codeAction", code_action_params(uri), id=3)
        assert server.answer(3, timeout=60)["error"]["code"] == -32602  # never opened: the didOpen was dropped
        assert server.received.empty()  # and nothing was published for it
    finally:
        server.stop()


def test_exit_without_shutdown_exits_1_as_lsp_says(server):
    """Issue 40 §7: the server exited 0 on `exit` without `shutdown` (LSP: 1)."""
    server.notify("exit", {})
    assert server.process.wait(timeout=20) == 1


def test_large_documents_are_not_linted_side_by_side_past_the_memory_budget():
    """Issue 40 §2: the server took documents up to the size limit in four lint
    processes at once. Work starts beside the work under way only while the memory
    budget (``engine/memory.py``) holds them all; alone, it always starts."""
    from xlalint import server, server_lint
    from xlalint.engine import memory

    big = "x = 1\n" * (memory.check_limit() // 10)  # 60% of the largest check: most of the budget
    check_big = server.work_memory(server_lint.lint_document, ("", big, None))
    assert memory.budget() // 2 < check_big <= memory.budget()
    assert server.fits(0, check_big)  # nothing under way
    assert not server.fits(check_big, check_big)
    small = server.work_memory(server_lint.lint_document, ("", "x = 1\n", None))
    assert small == memory.BASE + 6 * memory.CHECK_BYTES_PER_BYTE and server.fits(check_big, small)
    cells = [server_lint.CellSnapshot(n, "", None, "x = 1\n", True) for n in (1, 2)]
    assert server.work_memory(server_lint.lint_notebook, ("", cells)) == memory.BASE + 12 * memory.CHECK_BYTES_PER_BYTE
    fix = server.work_memory(server_lint.document_code_actions, ("", "x = 1\n" * 1000))
    assert fix == memory.BASE + 6000 * memory.FIX_BYTES_PER_BYTE
