"""``xlalint server``: the linter as a language server (LSP over stdio, with pygls).

Diagnostics on open, change and save (``# noqa`` respected, config found from the
document's path as on the command line); a quick fix per fixable finding and a
``source.fixAll.xlalint`` action that applies every safe fix. Unsafe fixes are offered
too when the client's ``initializationOptions`` has ``{"unsafeFixes": true}``.

Each version of a text document is linted once: the server keeps its lint (``linted``),
publishes it again for that version, and gives its code actions the findings near the
cursor, so they are answered without a lint. A quick fix's edit comes from the
statements it rewrites (``fixers/local_edits.py``). For a client that resolves code
actions (``textDocument.codeAction.resolveSupport`` with ``edit``), fix-all comes
without its edit, computed on ``codeAction/resolve``; others get it with the action.

A document of a workspace folder is linted as a part of an XLA program when an XLA
script of the folder imports it (``server_program.py``), as ``xlalint check .`` lints it,
told what the program's step loops iterate of its functions (``data.py``'s
``prepare_dataloader``, whose ``DataLoader`` XLA301 then reports).
The folder's program facts are found in a lint process when one of its documents is
first opened (its documents wait for them, ``PROGRAM_WAIT_S`` at most) and again when a
file is saved; a document whose part in a program changed is linted again.

Notebooks come as LSP 3.17 notebook documents (``notebookDocument/*``; each cell a text
document with its own URI). A notebook is linted as ``xlalint check nb.ipynb`` lints it:
its Python code cells in order, as one module, IPython magics handled as the CLI does;
each finding is published on its cell's URI, with a range within the cell. A fix may
edit several cells (an import goes after the imports in the first cells), so the quick
fixes and fix-all on a cell, and ``notebook.source.fixAll.xlalint``, return edits for
every cell they change.

JupyterLab's jupyterlab-lsp sends no notebook documents: it sends a notebook as one text
document, ``.virtual_documents/<notebook path>`` in the language ``python``, its code
cells joined, the magics turned into Python, and it maps the diagnostics to the cells
itself. That document is linted as Python, with the notebook's path for the config; a
``.ipynb`` text document in another language (the notebook's JSON) gets nothing.

Positions: our columns count characters; LSP's count UTF-16 code units (its default
encoding), so columns are converted per line.

Linting runs off the message loop, in child processes (:class:`LintPool`; see
``server_lint.py``), so the loop always reads the next message: ``shutdown`` is answered
and ``exit`` exits while a big document is linted. Documents are linted side by side,
and each one's diagnostics are published as soon as they are ready: a long lint of one
never holds up the others. The newest version of a document wins: its lint starts once
the document has not changed for a moment (``SETTLE_S``), a lint not started yet is
replaced by a newer one, a lint under way is cancelled (its process killed), and a
result for a version that is no longer current is dropped, never published. A document over the CLI's size limit is not linted (a
diagnostic says so). Every request gets an answer: one whose params are missing or do
not fit its method, or that names a document that was never opened, gets a JSON-RPC
error, and no error carries a traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcServerNotInitialized,
)
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from xlalint import __version__, server_lint, server_program
from xlalint.engine import memory
from xlalint.server_lint import FIX_ALL, NOTEBOOK_FIX_ALL, CellSnapshot, DocumentLint, Message

NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[
        types.NotebookDocumentFilterWithCells(
            notebook="jupyter-notebook", cells=[types.NotebookCellLanguage(language="python")]
        )
    ],
    save=True,
)

log = logging.getLogger(__name__)


class LintFailed(Exception):
    """The lint process raised (a bug in a rule or a fix) or died; said in one line."""


#: Lint processes at most: one document's long lint never holds up the others (each
#: process lints one document at a time; a new one starts when all are busy).
MAX_LINT_PROCESSES = 4
#: A document's lint starts once it has not changed for this long: while the user
#: types, the versions in between are never linted.
SETTLE_S = 0.1
#: How long a document of a workspace folder waits for the folder's first program facts
#: (``server_program.py``) before it is linted without them (and again with them).
PROGRAM_WAIT_S = 1.5


@dataclass
class _Work:
    function: Callable
    args: tuple
    done: Callable[[Any, str | None], None]
    not_before: float  # time.monotonic() when it may start
    memory: int = 0  # the bytes it may take at its peak (``work_memory``)


def fits(in_use: int, wanted: int) -> bool:
    """Whether work that may take ``wanted`` bytes starts beside work under way that may
    take ``in_use`` within the memory budget (alone it always does: its size was
    checked against the budget's limits)."""
    return in_use == 0 or in_use + wanted <= memory.budget()


def work_memory(function: Callable, args: tuple) -> int:
    """The peak memory of ``function(*args)`` as the memory budget counts it: a fix for
    code actions, a check otherwise, of the text it is given (``engine/memory.py``)."""
    chars = 0
    for arg in args:
        for item in arg if isinstance(arg, (list, tuple)) else (arg,):
            text = item.source if isinstance(item, CellSnapshot) else item
            chars += len(text) if isinstance(text, str) else 0
    fixes = "code_action" in getattr(function, "__name__", "")
    return memory.BASE + chars * (memory.FIX_BYTES_PER_BYTE if fixes else memory.CHECK_BYTES_PER_BYTE)


class _LintWorker:
    """One lint process (started on its first call, again if it dies) and the daemon
    thread here that sends it work and waits for the answer, so nothing waits on the
    loop. It dies with this process."""

    def __init__(self, pool: LintPool) -> None:
        self.pool = pool
        self.process: multiprocessing.process.BaseProcess | None = None
        self.connection = None
        self.key: object | None = None  # the work under way
        self.memory = 0  # what it may take (``_Work.memory``)
        self.cancelled = False
        threading.Thread(target=self._run, name="xlalint-lint", daemon=True).start()

    def cancel(self) -> None:
        """Kill the process: its work is stale (the pool's lock is held)."""
        self.cancelled = True
        if self.process is not None:
            self.process.kill()

    def _run(self) -> None:
        while (taken := self.pool.take(self)) is not None:
            function, args, done = taken
            try:
                ok, reply = self._call(function, args)
            except Exception as exc:  # it died (or was killed: stale, or `stop`), or a call could not be sent
                if self.process is not None:
                    self.process.kill()
                self.process = None
                ok, reply = False, f"the lint process failed ({type(exc).__name__}: {exc})"
            if self.pool.finish(self):  # not cancelled, not stopped
                done(reply, None) if ok else done(None, reply)

    def _call(self, function: Callable, args: tuple) -> tuple[bool, Any]:
        if self.process is None or not self.process.is_alive():
            # Not forked: this process has threads (pygls' reader), which a fork would copy mid-step.
            context = multiprocessing.get_context("spawn")
            parent, child = context.Pipe()
            self.process = context.Process(target=server_lint.serve, args=(child,), daemon=True, name="xlalint-lint")
            self.process.start()
            child.close()
            self.connection = parent
            if self.cancelled:  # cancelled while it started (``cancel`` saw no process to kill)
                self.process.kill()
        self.connection.send((function, args))
        return self.connection.recv()


class LintPool:
    """Runs ``server_lint`` calls in lint processes, several at once, each answered as
    it completes. Work is keyed (a document's URI): work with the same key never runs
    twice at once, work not started yet is replaced by newer work with the same key
    (in its place in the queue), and work under way is cancelled by newer work with
    its key: its process is killed, its result never comes."""

    def __init__(self, size: int = MAX_LINT_PROCESSES) -> None:
        self._size = size
        self._pending: dict[object, _Work] = {}
        self._running: dict[object, _LintWorker] = {}
        self._workers: list[_LintWorker] = []
        self._idle = 0
        self._ready = threading.Condition()
        self._stopped = False

    def submit(
        self, key: object, function: Callable, args: tuple, done: Callable[[Any, str | None], None], settle: float = 0
    ) -> None:
        """Call ``function(*args)`` in a lint process, not before ``settle`` seconds
        from now; then ``done(result, None)``, or ``done(None, why)`` if it failed.
        ``done`` runs on a thread of the pool."""
        with self._ready:
            if self._stopped:
                return
            self.cancel(key)
            self._pending[key] = _Work(function, args, done, time.monotonic() + settle, work_memory(function, args))
            if self._idle == 0 and len(self._workers) < self._size:
                self._workers.append(_LintWorker(self))
            self._ready.notify_all()

    def cancel(self, key: object) -> None:
        """Drop the work with ``key``, pending or under way."""
        with self._ready:
            self._pending.pop(key, None)
            running = self._running.pop(key, None)
            if running is not None:
                running.cancel()

    def stop(self) -> None:
        """Drop what is pending and kill the lints under way."""
        with self._ready:
            self._stopped = True
            self._pending.clear()
            for worker in self._workers:
                worker.cancel()
            self._ready.notify_all()

    def take(self, worker: _LintWorker) -> tuple[Callable, tuple, Callable] | None:
        """The next work for ``worker`` (waiting for one); None once stopped."""
        with self._ready:
            self._idle += 1
            try:
                while not self._stopped:
                    now, wake = time.monotonic(), None
                    for key, work in self._pending.items():
                        if key in self._running or not self._fits(work):
                            continue
                        if work.not_before <= now:
                            del self._pending[key]
                            self._running[key] = worker
                            worker.key, worker.cancelled, worker.memory = key, False, work.memory
                            return work.function, work.args, work.done
                        wake = work.not_before if wake is None else min(wake, work.not_before)
                    self._ready.wait(None if wake is None else wake - now)
                return None
            finally:
                self._idle -= 1

    def _fits(self, work: _Work) -> bool:
        return fits(sum(worker.memory for worker in self._workers if worker.key is not None), work.memory)

    def finish(self, worker: _LintWorker) -> bool:
        """``worker``'s work is over; whether its answer is to be given."""
        with self._ready:
            if self._running.get(worker.key) is worker:
                del self._running[worker.key]
            worker.key, worker.memory = None, 0
            self._ready.notify_all()  # work with the same key may wait for this
            return not (worker.cancelled or self._stopped)


#: A message longer than this is not read (a document at the size limit, JSON-escaped,
#: is far shorter): its bytes are skipped, a chunk at a time, and it gets an error.
MAX_MESSAGE_BYTES = 64 * 2**20
_MAX_HEADER_BYTES = 64 * 2**10  # a longer header line is read in pieces (no header is that long)
_SKIP_CHUNK = 2**20
#: What pygls is given in place of a message over ``MAX_MESSAGE_BYTES``.
_TOO_LARGE = "$/xlalint/messageTooLarge"


class BoundedInput:
    """The server's stdin as pygls reads it, in bounded memory: pygls reads a message of
    any length its header claims (``Content-Length: 99999999999`` was a MemoryError
    that killed the server). A body over ``MAX_MESSAGE_BYTES`` is not read: pygls gets
    a ``_TOO_LARGE`` notification in its place (answered with an error), and the
    body's bytes are skipped before the next header. A client whose header claims more
    than it sends loses what it sends next, as LSP's framing says."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self._skip = 0

    def readline(self) -> bytes:
        while self._skip:
            chunk = self._stream.read(min(self._skip, _SKIP_CHUNK))
            self._skip = self._skip - len(chunk) if chunk else 0  # at the end of input, nothing to skip
        return self._stream.readline(_MAX_HEADER_BYTES)

    def read(self, size: int) -> bytes:
        if size <= MAX_MESSAGE_BYTES:
            return self._stream.read(size)
        self._skip = size
        return json.dumps({"jsonrpc": "2.0", "method": _TOO_LARGE, "params": {"bytes": size}}).encode()


@dataclass(frozen=True)
class _TooLarge:
    """A message over ``MAX_MESSAGE_BYTES``, skipped unread."""

    size: int


@dataclass(frozen=True)
class _UnreadableRequest:
    """A request whose params could not be read as its method's."""

    id: Any
    method: str
    missing: bool


class XlalintProtocol(LanguageServerProtocol):
    """pygls' protocol, made to answer every request. pygls drops a request whose params
    do not fit its method (it shows a message instead) and one after ``shutdown``, and
    puts the traceback of a failed handler in the error's ``data``. A request before
    ``initialize`` gets ServerNotInitialized (-32002) and a notification then is dropped
    (but ``exit``), as LSP says; pygls would handle them."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.initialize_received = False

    def structure_message(self, data: dict[str, Any]):
        if data.get("method") == _TOO_LARGE and isinstance(data.get("params"), dict):
            return _TooLarge(data["params"]["bytes"])
        try:
            return super().structure_message(data)
        except JsonRpcException:
            if "id" in data and isinstance(data.get("method"), str):
                return _UnreadableRequest(data["id"], data["method"], data.get("params") is None)
            raise

    def handle_message(self, message) -> None:
        if isinstance(message, _TooLarge):
            limit = f"{MAX_MESSAGE_BYTES // 2**20} MiB"
            text = f"xlalint: a message of {message.size} bytes is over the limit of {limit}: it was skipped"
            # Its id is in what was not read: null, as JSON-RPC says (pygls would leave the id out).
            self._send_data(
                {"jsonrpc": "2.0", "id": None, "error": {"code": JsonRpcInvalidRequest.CODE, "message": text}}
            )
            self.notify(types.WINDOW_SHOW_MESSAGE, types.ShowMessageParams(types.MessageType.Error, text))
            return
        method, msg_id = getattr(message, "method", None), getattr(message, "id", None)
        if method == types.INITIALIZE:
            self.initialize_received = True
        elif not self.initialize_received and method not in (None, types.EXIT):
            if msg_id is not None or isinstance(message, _UnreadableRequest):
                error = JsonRpcServerNotInitialized(f"{method}: the server is not initialized yet")
                self._send_response(msg_id, error=error.to_response_error())
            return
        if isinstance(message, _UnreadableRequest):
            what = "no params" if message.missing else "params that do not fit it"
            error = JsonRpcInvalidParams(f"{message.method}: the request has {what}")
            self._send_response(message.id, error=error.to_response_error())
            return
        if self._shutdown and method not in (None, types.EXIT) and msg_id is not None:
            error = JsonRpcInvalidRequest(f"{method}: the server is shutting down")
            self._send_response(msg_id, error=error.to_response_error())
            return
        super().handle_message(message)

    def notify_json(self, method: str, params: dict) -> None:
        """A notification whose params are LSP's JSON already (no lsprotocol objects to
        convert on the loop: a document's thousands of diagnostics)."""
        self._send_data({"jsonrpc": "2.0", "method": method, "params": params})

    def _send_response(self, msg_id, result=None, error: types.ResponseError | None = None) -> None:
        if error is not None and error.data is not None:  # a traceback is for our log, not the client
            error = types.ResponseError(code=error.code, message=error.message)
        super()._send_response(msg_id, result, error)


class XlalintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "xlalint",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=NOTEBOOK_SYNC,
            protocol_cls=XlalintProtocol,
        )
        self.unsafe_fixes = False
        #: The client resolves code actions (``codeAction/resolve`` for their edits).
        self.resolve_edits = False
        #: Text document URI -> (version, its part in an XLA program (``program_of``), its
        #: lint): each version is linted once, and its code actions use that lint.
        self.linted: dict[str, tuple[int | None, tuple[str, ...] | None, DocumentLint]] = {}
        #: Workspace folder -> its modules that an XLA program imports, by real path, each
        #: with what the program tells it (``server_program.py``); None while they are
        #: first computed.
        self.programs: dict[str, server_program.Programs | None] = {}
        #: Workspace folder -> its files' facts, kept by the last computation.
        self.program_facts: dict[str, dict[str, server_program.FileFacts]] = {}
        #: Workspace folder -> the documents waiting for its first program facts.
        self.waiting: dict[str, set[str]] = {}
        #: The folders whose documents waited PROGRAM_WAIT_S and are linted without them.
        self.impatient: set[str] = set()
        # Notebook URI -> the cell URIs last published, so that cells that left get cleared.
        self.published_cells: dict[str, set[str]] = {}
        self.linter = LintPool()
        self.loop: asyncio.AbstractEventLoop | None = None  # the message loop
        self.shutting_down = False
        #: The status to exit with (``start``): LSP says 0 after ``shutdown``, else 1.
        self.exit_status = 0

    # Documents are read, and messages written, on the loop only: the lint thread hands
    # its results over with `in_loop`.
    def in_loop(self, function: Callable, *args) -> None:
        loop = self.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(function, *args)

    def tell(self, messages: list[Message]) -> None:
        for message in messages:
            if message.show:
                self.window_show_message(types.ShowMessageParams(message.kind, message.text))
            else:
                self.window_log_message(types.LogMessageParams(message.kind, message.text))

    def open_document(self, uri: str) -> TextDocument | None:
        return self.workspace.text_documents.get(unquote(uri))

    def lint(self, key: object, function: Callable, args: tuple, then: Callable[[Any], None]) -> None:
        """Run ``function(*args)`` in the lint process; ``then(result)`` on the loop, after
        its messages are sent."""

        def done(reply, failure: str | None) -> None:
            if failure is not None:
                self.in_loop(self.tell, [Message(types.MessageType.Error, f"xlalint: {failure}")])
                return
            result, messages = reply
            self.in_loop(self.tell, messages)
            self.in_loop(then, result)

        self.loop = asyncio.get_running_loop()
        self.linter.submit(key, function, args, done, settle=SETTLE_S)

    async def ask(self, function: Callable, *args) -> Any:
        """The result of ``function(*args)``, run in the lint process, for a request."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()

        def settle(reply, failure: str | None) -> None:
            if not future.done():
                future.set_exception(LintFailed(failure)) if failure is not None else future.set_result(reply)

        self.loop = loop
        self.linter.submit(object(), function, args, lambda *outcome: loop.call_soon_threadsafe(settle, *outcome))
        result, messages = await future
        self.tell(messages)
        return result

    def publish(self, uri: str) -> None:
        """Lint the document (or the notebook it is a cell of) as it is now; a version
        already linted is published from its lint."""
        notebook = self.workspace.get_notebook_document(cell_uri=uri)
        if notebook is not None:  # a cell is linted with the rest of its notebook
            self.publish_notebook(notebook.uri)
            return
        document = self.open_document(uri)
        if document is None:
            return
        folder = self.folder_of(uri)
        if folder is not None and folder not in self.programs:
            self.find_programs(folder)
            asyncio.get_running_loop().call_later(PROGRAM_WAIT_S, self.stop_waiting, folder)
        if folder is not None and self.programs.get(folder) is None and folder not in self.impatient:
            # Its program is not known yet: linted once it is (a module alone would miss
            # what it is checked for as a part of an XLA program, then get it), or
            # after PROGRAM_WAIT_S (a large folder), and again if it is a part of one.
            self.waiting.setdefault(folder, set()).add(uri)
            return
        program = self.program_of(uri)
        if server_lint.too_large(document.source) is not None:  # said here, not sent to the lint process
            self.linter.cancel(uri)  # an earlier version's lint is stale
            linted, messages = server_lint.analyze_document(uri, document.source, document.language_id)
            self.tell(messages)
            self.publish_current(uri, document.version, program, linted)
            return
        cached = self.current_lint(uri)
        if cached is not None:
            self.linter.cancel(uri)  # a lint of another version is stale
            self.publish_current(uri, document.version, program, cached)
            return
        then = partial(self.publish_current, uri, document.version, program)
        args = (uri, document.source, document.language_id, program)
        self.lint(uri, server_lint.analyze_document, args, then)

    def current_lint(self, uri: str) -> DocumentLint | None:
        """The lint of the document's current version, if it was linted."""
        document = self.open_document(uri)
        version, program, linted = self.linted.get(uri, (None, None, None))
        if document is None or linted is None or version != document.version:
            return None
        return linted if program == self.program_of(uri) else None

    def program_of(self, uri: str) -> tuple[str, ...] | None:
        """What an XLA program of its workspace folder tells the document (its functions
        whose results the program's step loops iterate), when it is a module of one;
        None when it is not (``server_program.py``)."""
        folder = self.folder_of(uri)
        members = self.programs.get(folder) if folder is not None else None
        path = server_lint.document_path(uri) if members else None
        return None if path is None else members.get(os.path.realpath(path))

    def folder_of(self, uri: str) -> str | None:
        """The workspace folder (the innermost) that holds the document's file."""
        path = server_lint.document_path(uri)
        if path is None or path.endswith(".ipynb"):
            return None
        roots = [to_fs_path(folder.uri) for folder in self.workspace.folders.values()]
        if not roots and self.workspace.root_path:
            roots = [self.workspace.root_path]
        inside = [root for root in roots if root and (path + os.sep).startswith(root.rstrip(os.sep) + os.sep)]
        return max(inside, key=len, default=None)

    def find_programs(self, folder: str) -> None:
        """(Re)compute the program facts of ``folder`` in a lint process; the documents
        whose part in a program changed are linted again."""
        self.programs.setdefault(folder, None)
        known = self.program_facts.get(folder, {})

        def done(reply, failure: str | None) -> None:
            if failure is not None:
                self.in_loop(self.tell, [Message(types.MessageType.Error, f"xlalint: {failure}")])
                self.in_loop(self.programs_found, folder, {}, {})
                return
            (members, facts), messages = reply
            self.in_loop(self.tell, messages)
            self.in_loop(self.programs_found, folder, members, facts)

        self.loop = asyncio.get_running_loop()
        args = (folder, known)
        self.linter.submit(("programs", folder), server_program.xla_program_modules, args, done, settle=SETTLE_S)

    def stop_waiting(self, folder: str) -> None:
        """The folder's first program facts take long: its documents are linted without them."""
        if self.programs.get(folder) is None:
            self.impatient.add(folder)
            for uri in sorted(self.waiting.pop(folder, set())):
                self.publish(uri)

    def programs_found(self, folder: str, members: server_program.Programs, facts: dict) -> None:
        before = {uri: self.program_of(uri) for uri in self.linted if self.folder_of(uri) == folder}
        self.programs[folder], self.program_facts[folder] = members, facts
        for uri in sorted(self.waiting.pop(folder, set())):
            self.publish(uri)
        for uri, was in before.items():
            if self.program_of(uri) != was:
                self.linted.pop(uri, None)
                self.publish(uri)

    def publish_current(
        self, uri: str, version: int | None, program: tuple[str, ...] | None, linted: DocumentLint
    ) -> None:
        document = self.open_document(uri)
        if self.shutting_down or document is None or document.version != version:
            return  # stale: closed, or a newer version is on its way
        if program != self.program_of(uri):
            self.publish(uri)  # linted with program facts that changed since: again with the new ones
            return
        self.linted[uri] = (version, program, linted)
        params = {"uri": uri, "diagnostics": linted.diagnostics}
        if version is not None:
            params["version"] = version
        self.protocol.notify_json(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, params)

    def publish_notebook(self, notebook_uri: str) -> None:
        notebook = self.workspace.get_notebook_document(notebook_uri=notebook_uri)
        if notebook is not None:
            then = partial(self.publish_notebook_current, notebook_uri, notebook.version)
            self.lint(notebook_uri, server_lint.lint_notebook, (notebook_uri, self.notebook_cells(notebook)), then)

    def publish_notebook_current(self, notebook_uri: str, version: int, published: list) -> None:
        notebook = self.workspace.get_notebook_document(notebook_uri=notebook_uri)
        if self.shutting_down or notebook is None or notebook.version != version:
            return
        if any(getattr(self.open_document(cell.uri), "version", None) != cell.version for cell, _ in published):
            return  # a cell changed since: its lint is on its way
        for cell, diagnostics in published:
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=cell.uri, version=cell.version, diagnostics=diagnostics)
            )
        cell_uris = {cell.uri for cell, _ in published}
        self.clear(self.published_cells.get(notebook_uri, set()) - cell_uris)
        self.published_cells[notebook_uri] = cell_uris

    def clear(self, uris) -> None:
        for uri in sorted(uris):
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    def notebook_cells(self, notebook: types.NotebookDocument) -> list[CellSnapshot]:
        """The notebook's code cells as they are now."""
        cells = []
        for number, cell in enumerate(notebook.cells, 1):
            document = self.open_document(cell.document)
            if cell.kind != types.NotebookCellKind.Code or document is None:
                continue
            python = document.language_id in (None, "python")
            cells.append(CellSnapshot(number, cell.document, document.version, document.source, python))
        return cells


def resolves_edits(capabilities: types.ClientCapabilities) -> bool:
    """The client resolves a code action's ``edit`` lazily (``codeAction/resolve``)."""
    text = capabilities.text_document
    support = text.code_action.resolve_support if text is not None and text.code_action is not None else None
    return support is not None and "edit" in support.properties


def create_server() -> XlalintServer:
    server = XlalintServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: XlalintServer, params: types.InitializeParams) -> None:
        options = params.initialization_options
        ls.unsafe_fixes = bool(isinstance(options, dict) and options.get("unsafeFixes"))
        ls.resolve_edits = resolves_edits(params.capabilities)

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: XlalintServer, *args) -> None:
        ls.shutting_down = True  # nothing more is published
        ls.linter.stop()

    @server.feature(types.EXIT)
    def exit(ls: XlalintServer, *args) -> None:
        # pygls exits 1 without a shutdown first, but from within its loop, which takes
        # the SystemExit for a stop: ``start`` exits with this status after the loop.
        ls.exit_status = 0 if ls.shutting_down else 1

    # Open, change and save all mean: lint the document (or the notebook) as it is now.
    def publish_document(ls: XlalintServer, params) -> None:
        ls.publish(params.text_document.uri)

    def publish_notebook(ls: XlalintServer, params) -> None:
        ls.publish_notebook(params.notebook_document.uri)

    for event in (types.TEXT_DOCUMENT_DID_OPEN, types.TEXT_DOCUMENT_DID_CHANGE):
        server.feature(event)(publish_document)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: XlalintServer, params: types.DidSaveTextDocumentParams) -> None:
        # Saved: linted again (the config, or a module it imports, may have changed on
        # disk), and its folder's programs found again (what it imports may have changed).
        uri = params.text_document.uri
        ls.linted.pop(uri, None)
        folder = ls.folder_of(uri)
        if folder is not None and ls.programs.get(folder) is not None:
            ls.find_programs(folder)
        ls.publish(uri)

    for event in (
        types.NOTEBOOK_DOCUMENT_DID_OPEN,
        types.NOTEBOOK_DOCUMENT_DID_CHANGE,
        types.NOTEBOOK_DOCUMENT_DID_SAVE,
    ):
        server.feature(event)(publish_notebook)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: XlalintServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.linter.cancel(params.text_document.uri)
        ls.linted.pop(params.text_document.uri, None)
        for waiting in ls.waiting.values():
            waiting.discard(params.text_document.uri)
        ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[])
        )

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_did_close(ls: XlalintServer, params: types.DidCloseNotebookDocumentParams) -> None:
        ls.linter.cancel(params.notebook_document.uri)
        closed = {cell.uri for cell in params.cell_text_documents}
        ls.clear(closed | ls.published_cells.pop(params.notebook_document.uri, set()))

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL, NOTEBOOK_FIX_ALL], resolve_provider=True
        ),
    )
    async def code_action(ls: XlalintServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        # The documents are read here, on the loop; the linting is done in the lint process.
        uri = params.text_document.uri
        document = ls.open_document(uri)
        if document is None:
            raise JsonRpcInvalidParams(f"{uri} is not open: code actions are for open documents")
        notebook = ls.workspace.get_notebook_document(cell_uri=uri)
        try:
            if notebook is not None:
                cells = ls.notebook_cells(notebook)
                return await ls.ask(
                    server_lint.notebook_code_actions,
                    notebook.uri,
                    cells,
                    document.source,
                    params,
                    ls.unsafe_fixes,
                    ls.resolve_edits,
                )
            return await ls.ask(
                server_lint.document_code_actions,
                uri,
                document.source,
                document.language_id,
                params,
                ls.unsafe_fixes,
                None if (linted := ls.current_lint(uri)) is None else linted.near(params.range),
                ls.resolve_edits,
                ls.program_of(uri),
            )
        except LintFailed as exc:  # an error answer, not a traceback
            raise JsonRpcInternalError(f"xlalint: {exc}") from None

    @server.feature(types.CODE_ACTION_RESOLVE)
    async def resolve_code_action(ls: XlalintServer, action: types.CodeAction) -> types.CodeAction:
        """The edit of a code action given without one (fix-all; see ``server_lint``)."""
        data = action.data if isinstance(action.data, dict) else {}
        uri = data.get("uri")
        document = ls.open_document(uri) if isinstance(uri, str) else None
        if document is None or action.edit is not None:
            return action  # not ours to resolve, or its document was closed: as it came
        notebook = ls.workspace.get_notebook_document(cell_uri=uri)
        if notebook is not None:
            try:
                cells = ls.notebook_cells(notebook)
                return await ls.ask(
                    server_lint.resolve_notebook_code_action, notebook.uri, cells, action, ls.unsafe_fixes
                )
            except LintFailed as exc:
                raise JsonRpcInternalError(f"xlalint: {exc}") from None
        linted, wanted = ls.current_lint(uri), data.get("fix")
        if linted is not None and isinstance(wanted, list) and len(wanted) == 5 and isinstance(wanted[1], int):
            line, end_line = wanted[1] - 1, wanted[3] - 1  # a quick fix: the lint of its lines is enough
            linted = linted.near(types.Range(types.Position(line, 0), types.Position(end_line, 0)))
        else:
            linted = None  # fix-all fixes the document: it needs no lint
        try:
            return await ls.ask(
                server_lint.resolve_code_action,
                uri,
                document.source,
                action,
                ls.unsafe_fixes,
                linted,
                ls.program_of(uri),
            )
        except LintFailed as exc:
            raise JsonRpcInternalError(f"xlalint: {exc}") from None

    return server


def start() -> None:
    server = create_server()
    server.start_io(BoundedInput(sys.stdin.buffer))
    if server.exit_status:
        sys.exit(server.exit_status)
