"""XLA104 cuda-device on whole files: findings, safe and unsafe fixes, idempotence."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rules.fixture_checks import assert_fixes_to, expected_fixed, findings_of
from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source
from xlalint.engine.lint import lint_source
from xlalint.rules._cuda_api import ACCELERATOR_API, CUDA_API, DEFAULT, lookup

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "XLA104"
CODE = "XLA104"

# (line, 1-based column, fix applicability or None) of every finding, per fixture.
EXPECTED = {
    # Issue 21: tests of a ported device string against "cuda" test "xla", but for the
    # branch that pins memory (line 25), which stays false on XLA.
    "string_guards": [
        (13, 32, "safe"),  # init_process_group(backend="nccl")
        (15, 14, "safe"),  # device = f"cuda:{ddp_local_rank}", read as a string
        (18, 8, "unsafe"),  # if torch.cuda.is_available(): chooses the device
        (19, 18, "safe"),  # device = "cuda"
        (41, 35, "safe"),  # DDP(model, device_ids=[ddp_local_rank])
        (52, 9, "safe"),  # torch.cuda.synchronize() under `if device_type == "cuda":`: sync, wait
        (56, 23, None),  # torch.cuda.max_memory_allocated(): reported, never a number
    ],
    "train_cuda": [
        (29, 5, "safe"),  # torch.cuda.synchronize()
        (40, 5, "safe"),  # torch.cuda.manual_seed_all(...)
        (41, 14, "safe"),  # torch.device("cuda" if torch.cuda.is_available() else "cpu")
        (46, 13, "safe"),  # Net().cuda()
        (47, 62, "safe"),  # map_location="cuda:0"
        (50, 75, "safe"),  # map_location=device (a CUDA device)
        (51, 14, "unsafe"),  # GradScaler()
        (52, 34, "safe"),  # device="cuda"
        (58, 17, "safe"),  # y.cuda(non_blocking=True)
        (60, 18, "unsafe"),  # autocast()
        (69, 9, "safe"),  # torch.cuda.empty_cache()
    ],
    "aliases": [
        (6, 10, "safe"),  # DEVICE = "cuda:0", used as a device in build()
        (10, 5, "safe"),  # tc.manual_seed
        (11, 5, "safe"),  # cuda.set_device
        (12, 5, "safe"),  # T.cuda.synchronize
        (17, 32, "safe"),  # device=0
        (18, 27, "safe"),  # .to(0)
        (22, 14, "unsafe"),  # mixed.GradScaler()
        (23, 10, "unsafe"),  # mixed.autocast("cuda", ...)
        (24, 20, "safe"),  # x.cuda()
        (28, 12, "safe"),  # T.device(0)
        (28, 25, "safe"),  # T.device(type="cuda", index=1)
    ],
    "noqa": [
        (3, 9, "safe"),  # a suppression of E501 does not hide XLA104
        (10, 27, "safe"),  # nor does one of XLA102
    ],
    "self_scaler": [
        (7, 22, "safe"),  # model.cuda()
        (9, 23, "unsafe"),  # self.scaler = torch.amp.GradScaler("cuda", ...)
        (13, 14, "unsafe"),  # torch.autocast(device_type="cuda", ...)
        (14, 40, "safe"),  # batch.to("cuda", ...)
    ],
    "not_flagged": [],
    "device_reuse": [
        (11, 13, "safe"),  # model.cuda() -> model.to(device): `device` holds the XLA device
        (13, 18, "safe"),  # x.to("cuda", ...) -> x.to(device, ...)
        (14, 35, "safe"),  # device="cuda" -> device=device
        (18, 5, "safe"),  # before `device` is set: torch_xla.device()
        (27, 5, "safe"),  # `device` may be "cpu": torch_xla.device()
    ],
    # Issue 36 item 1: the flag is ported with the tensor type it chooses (one unsafe fix).
    "wgan_tensor_type": [
        (10, 16, "unsafe"),  # cuda = True if torch.cuda.is_available() else False
        (15, 5, "safe"),  # generator.cuda() under `if cuda:`
        (16, 5, "safe"),  # critic.cuda()
        (17, 10, None),  # torch.cuda.FloatTensor chosen by `cuda`: ported by the flag's fix
    ],
    # Item 2: a test that only builds log text and one that only prints are no port sites.
    "log_memory": [
        (9, 10, "safe"),  # the device selection
        (27, 60, None),  # torch.cuda.max_memory_allocated(): reported, never a number
    ],
    # Item 3: the seeds go before the test (which goes with them); a memory read keeps its test.
    "seed_guard": [
        (17, 9, "safe"),  # torch.cuda.manual_seed
        (18, 9, "safe"),  # torch.cuda.manual_seed_all
        (19, 14, "safe"),  # the device selection
        (29, 8, None),  # if torch.cuda.is_available(): peak = torch.cuda.max_memory_allocated()
        (30, 16, None),  # the memory read
    ],
    # Item 7: a guard of CUDA-only code keeps its test; one that guards nothing CUDA is fixed.
    "flash_guard": [
        (11, 12, None),  # if not torch.cuda.is_available() or not flash: return ... get_device_properties
        (13, 13, None),  # torch.cuda.get_device_properties(...)
        (18, 12, "unsafe"),  # if not torch.cuda.is_available() or not wide: -> if not wide:
        (26, 10, "safe"),  # the device selection
    ],
    # Item 5: the device in scope, not `torch_xla.device()` again.
    "device_scope": [
        (7, 10, "safe"),  # the module's device
        (12, 52, "safe"),  # .to("cuda", ...) in a function: the module's `device`
        (18, 15, "safe"),  # `device` parameter, one caller passes a device that may be "cpu"
        (18, 30, "safe"),
        (23, 25, "safe"),  # `device` parameter every caller passes the module's device
        (28, 23, "safe"),  # self.device = torch.device("cuda") -> the module's `device`
        (29, 22, "safe"),
        (32, 27, "safe"),
        (36, 8, "unsafe"),  # the availability test that chooses `device` in run()
        (37, 18, "safe"),  # device = torch.device("cuda") in run()
        (40, 11, "safe"),  # `device` may be "cpu" there: torch_xla.device()
    ],
    "availability": [
        (7, 8, "unsafe"),  # assert torch.cuda.is_available(): the assertion goes
        # `if torch.cuda.is_available(): torch.cuda.manual_seed(...)`: one finding, at the
        # seed, which goes where it runs on XLA (before the test, which then goes).
        (10, 5, "safe"),  # torch.cuda.manual_seed -> torch_xla.manual_seed
        (11, 23, "unsafe"),  # the bf16 condition as a whole -> "bfloat16"
        (12, 11, "unsafe"),  # a flag that chooses no device -> True
        (13, 7, "unsafe"),  # ... and not has_gpu -> not has_gpu
    ],
    # Issue 31: branches that only print, warn or log change nothing on the device; the
    # branch that also stops the script is reported.
    "availability_warning": [
        (23, 8, "unsafe"),  # if not torch.cuda.is_available(): ... sys.exit(1)
    ],
    "amp_recipe": [
        (11, 10, "safe"),  # device = "cuda", also autocast's device_type -> "xla"
        (18, 12, "safe"),  # .cuda()
        (23, 11, "safe"),  # .cuda()
        (28, 10, "unsafe"),  # the first GradScaler
        (30, 10, "unsafe"),  # autocast(device_type=device): `device` is "cuda"
        (42, 10, "unsafe"),  # the second GradScaler, same variable
        (44, 10, "unsafe"),  # autocast(device_type=device, ...)
    ],
    "spawn_import_time": [
        (16, 10, "safe"),  # module level in a spawning script -> torch.device("xla")
        (18, 15, "unsafe"),  # the fallback os.environ.get(...) is user logic
        (21, 35, "safe"),  # default argument -> torch.device("xla")
    ],
    "mnist_accelerator": [
        (54, 39, "unsafe"),  # use_accel = ... and torch.accelerator.is_available()
        (58, 18, "safe"),  # torch.accelerator.current_accelerator()
    ],
    "mnist_use_cuda": [
        # use_cuda = ... and torch.cuda.is_available(): no fix, `if use_cuda:` at line 72
        # reads CUDA's memory (it would print 0 on XLA); the device is ported at line 57.
        (51, 37, None),
        (55, 9, "safe"),  # torch.cuda.manual_seed
        (57, 14, "safe"),  # torch.device("cuda" if use_cuda else "cpu")
        (73, 30, None),  # print(... torch.cuda.max_memory_allocated() ...): no number to write
    ],
    "cuda_api": [
        (9, 5, "safe"),  # reset_peak_memory_stats
        (10, 5, "safe"),  # reset_max_memory_allocated
        (11, 12, "safe"),  # Stream(): its only use is the `with`, which goes
        (12, 13, None),  # Event(...): returned, so it stays
        (13, 10, "safe"),  # with torch.cuda.device(rank): the body stays
        (14, 14, "safe"),  # with torch.cuda.stream(side): the body stays
        (15, 34, "safe"),  # f"cuda:{rank}"
        (16, 5, "safe"),  # synchronize
        (17, 12, None),  # a memory query used in a computation: reported, no fix
        (18, 19, None),  # a memory query that is printed: reported, no fix (no fake "0 MiB")
        (19, 13, None),  # get_rng_state
        (20, 12, None),  # get_device_name
        (21, 13, "unsafe"),  # current_device -> xr.local_ordinal()
        (22, 31, "safe"),  # is_bf16_supported
        (24, 5, None),  # nvtx.range_push
    ],
    "ddp_torchrun": [
        (18, 5, "safe"),  # torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        (19, 32, "safe"),  # init_process_group(backend="nccl")
        (25, 31, "safe"),  # model.to(self.gpu_id)
        (28, 49, "safe"),  # DDP(..., device_ids=[self.gpu_id])
        (40, 32, "safe"),  # source.to(self.gpu_id)
        (41, 34, "safe"),  # targets.to(self.gpu_id)
    ],
    # Issue 33: DDP gets the `device` variable the same port makes the XLA device (not a
    # string one); `local_rank`, unused once ported, goes in the next pass (not when read).
    "ddp_device_variable": [
        (14, 5, "safe"),  # torch.cuda.set_device(local_rank)
        (15, 14, "safe"),  # device = torch.device("cuda", local_rank)
        (16, 29, "safe"),  # init_process_group("nccl")
        (18, 35, "safe"),  # device_ids=[local_rank] -> [device]
        (25, 14, "safe"),  # device = f"cuda:{local_rank}", read as a string -> "xla"
        (27, 35, "safe"),  # device_ids=[local_rank] -> [torch_xla.device()]: "xla" has no index
        (34, 14, "safe"),  # torch.device(f"cuda:{local_rank}")
        (35, 62, "safe"),  # device_ids=[local_rank] -> [device]
    ],
    "argparse_device": [
        (15, 41, "safe"),  # --device default: the selection -> "xla", read as a string
        (16, 56, "safe"),  # --eval-device default "cuda:0", copied and given as a device
        (23, 29, "unsafe"),  # setup(..., backend="nccl"): the default -> "xla", rank= goes
        (40, 63, "safe"),  # map_location= of the --eval-device copy -> "cpu"
        (47, 41, "safe"),  # args.backend of --backend default "nccl": the default -> "xla"
    ],
    "streams": [
        (15, 23, "safe"),  # self.stream = torch.cuda.Stream(): every use goes
        (24, 14, "safe"),  # with torch.cuda.stream(self.stream)
        (29, 9, "safe"),  # torch.cuda.current_stream().wait_stream(self.stream)
        (32, 29, "safe"),  # x.record_stream(torch.cuda.current_stream())
        (33, 29, "safe"),  # y.record_stream(...)
        (39, 12, "safe"),  # side = torch.cuda.Stream(priority=-1)
        (40, 13, "safe"),  # ready = torch.cuda.Event(): it only orders the streams
        (41, 13, None),  # start: it times (elapsed_time)
        (42, 11, None),  # end: the same
        (47, 26, "safe"),  # side.wait_stream(torch.cuda.current_stream())
        (49, 14, "safe"),  # with torch.cuda.stream(side), torch.autocast(...): the item goes
        (49, 39, "unsafe"),  # torch.autocast("cuda", ...)
        (53, 9, "safe"),  # torch.cuda.current_stream().wait_event(ready)
        (65, 10, "safe"),  # with torch.cuda.device(device)
    ],
}


def settings() -> Settings:
    return Settings()


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_findings(case):
    findings = [f for f in lint_source(read(f"{case}.py"), f"{case}.py", settings()) if f.code == CODE]
    got = [(f.span.line, f.span.col + 1, f.fix.applicability if f.fix else None) for f in findings]
    assert got == EXPECTED[case]


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_fix(case, unsafe):
    assert_fixes_to(
        CODE,
        read(f"{case}.py"),
        f"{case}.py",
        expected_fixed(FIXTURES, case, unsafe),
        unsafe=unsafe,
        settings=settings(),
    )


def test_training_script_is_fully_ported():
    """With unsafe fixes the CUDA training script has no XLA104 finding left, and no
    CUDA API: the device, seeding, autocast, scaler and map_location are all XLA's."""
    result = fix_source(read("train_cuda.py"), "train_cuda.py", settings(), unsafe=True, select=[CODE])
    assert result.error is None
    assert [f for f in result.remaining if f.code == CODE] == []
    tree = ast.parse(result.source)
    attributes = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    assert not attributes & {"cuda", "synchronize", "empty_cache", "manual_seed_all", "scale", "unscale_", "update"}
    strings = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    assert "cuda" not in strings and "cuda:0" not in strings
    assert "import torch_xla\n" in result.source
    assert "import torch_xla.core.xla_model as xm\n" in result.source


def test_safe_fix_leaves_the_scaler():
    """The scaler and autocast are unsafe fixes: `xlalint fix` alone keeps them."""
    result = fix_source(read("train_cuda.py"), "train_cuda.py", settings(), select=[CODE])
    assert "scaler = GradScaler()" in result.source
    remaining = [f for f in result.remaining if f.code == CODE]
    # Two import lines were added above them, and the sync before the wait.
    assert [(f.span.line, f.fix.applicability) for f in remaining] == [(54, "unsafe"), (63, "unsafe")]


def test_old_target_uses_xla_device_and_set_rng_state():
    old = Settings(target_version=(2, 3))
    result = fix_source(read("aliases.py"), "aliases.py", old, select=[CODE])
    assert result.error is None
    assert "torch_xla.device()" not in result.source
    assert "DEVICE = xm.xla_device()" in result.source
    assert "xm.set_rng_state(seed)" in result.source
    assert "import torch_xla.core.xla_model as xm\n" in result.source


def test_noqa_for_another_code_does_not_hide():
    source = "import torch\nmodel = Net().cuda()  # noqa: E501\n"
    assert [f.code for f in lint_source(source, "x.py", settings())] == [CODE]
    source = "import torch\nmodel = Net().cuda()  # noqa: XLA104\n"
    assert [f.code for f in lint_source(source, "x.py", settings()) if f.code == CODE] == []


def test_scaler_removal_with_every_rule():
    """XLA106 inserts `scaler.unscale_(opt)` before an unguarded clip in the same pass
    as the scaler is removed: the result must not keep a dangling `scaler`."""
    source = (
        "import torch\n"
        "import torch_xla\n"
        "\n"
        "scaler = torch.cuda.amp.GradScaler()\n"
        "for x, y in loader:\n"
        "    loss = model(x)\n"
        "    scaler.scale(loss).backward()\n"
        "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
        "    scaler.step(opt)\n"
        "    scaler.update()\n"
        "    torch_xla.sync()\n"
    )
    result = fix_source(source, "train.py", settings(), unsafe=True)
    assert result.error is None, result.error
    assert "scaler" not in result.source
    assert "    loss.backward()\n" in result.source
    assert "    opt.step()\n" in result.source


def test_every_table_row_is_complete():
    """Each row of the torch.cuda / torch.accelerator table has what its action needs,
    and its text uses only the placeholders the rule fills in."""
    placeholders = {"{xm}", "{xr}", "{torch_xla}", "{device}", "{manual_seed}", "{sync}", "{arg0}", "{name}"}
    for table in (CUDA_API, ACCELERATOR_API):
        for name, row in table.items():
            if row.action == "replace":
                assert row.template, name
                assert row.arguments == row.template.count("{arg0}"), name
            if row.action in ("replace", "remove", "report", "query", "wait", "device", "context", "stream"):
                assert row.message, name
            for text in (row.message, row.template or ""):
                leftover = text
                for placeholder in placeholders:
                    leftover = leftover.replace(placeholder, "")
                assert "{" not in leftover and "}" not in leftover, (name, text)
    assert lookup("torch.cuda.memory.empty_cache") == ("empty_cache", CUDA_API["empty_cache"])
    assert lookup("torch.cuda.some_future_api") == ("some_future_api", DEFAULT)
    assert lookup("torch.cudax.thing") is None


def test_messages_follow_the_target_version():
    """With target-version 2.3 the fix writes `xm.xla_device()`: so does every message."""
    old = Settings(target_version=(2, 3))
    for case in ("train_cuda", "aliases", "cuda_api", "mnist_use_cuda"):
        findings = [f for f in lint_source(read(f"{case}.py"), f"{case}.py", old) if f.code == CODE]
        assert findings
        for finding in findings:
            assert "torch_xla.device()" not in finding.message, finding.message
            assert "torch_xla.manual_seed" not in finding.message, finding.message
    messages = [f.message for f in lint_source(read("aliases.py"), "aliases.py", old) if f.code == CODE]
    assert any("`xm.xla_device()`" in m for m in messages)
    assert any("`xm.set_rng_state(...)`" in m for m in messages)
    new = [f.message for f in lint_source(read("aliases.py"), "aliases.py", settings()) if f.code == CODE]
    assert any("`torch_xla.device()`" in m for m in new)


def test_blocked_scaler_names_the_line():
    source = (
        "import torch\n"
        "scaler = torch.amp.GradScaler('cuda')\n"
        "scaler.scale(loss).backward()\n"
        "train_one_epoch(model, scaler)\n"
    )
    [finding] = [f for f in lint_source(source, "x.py", settings()) if f.code == CODE]
    assert finding.fix is None
    assert "(no fix: line 4 has a use the fix cannot rewrite)" in finding.message
    reassigned = "import torch\nscaler = torch.amp.GradScaler('cuda')\nscaler = None\n"
    [finding] = [f for f in lint_source(reassigned, "x.py", settings()) if f.code == CODE]
    assert finding.fix is None and "line 3 assigns it something else" in finding.message


def test_spawning_script_never_creates_the_runtime_at_import():
    """After every fix, no module-level statement and no default argument of the
    spawning script calls `torch_xla.device()` or `xm.xla_device()`."""
    for unsafe in (False, True):
        result = fix_source(read("spawn_import_time.py"), "s.py", settings(), unsafe=unsafe, select=[CODE])
        tree = ast.parse(result.source)
        at_import: list[ast.AST] = [s for s in tree.body if not isinstance(s, (ast.FunctionDef, ast.ClassDef))]
        for func in ast.walk(tree):
            if isinstance(func, ast.FunctionDef):
                at_import += [*func.args.defaults, *(d for d in func.args.kw_defaults if d is not None)]
        for node in at_import:
            for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
                assert ast.unparse(call.func) not in ("torch_xla.device", "xm.xla_device"), ast.unparse(call)
        assert 'torch.device("xla")' in result.source


def test_safe_fix_keeps_a_user_fallback():
    source = read("spawn_import_time.py")
    safe = fix_source(source, "s.py", settings(), select=[CODE]).source
    assert 'os.environ.get("DATA_DEVICE", "cpu")' in safe
    unsafe = fix_source(source, "s.py", settings(), unsafe=True, select=[CODE]).source
    assert 'data_device = torch.device("xla")' in unsafe


def test_a_flag_guarding_a_memory_read_is_not_ported_but_the_device_is():
    """Issue 36 item 3: `if use_cuda: print(... torch.cuda.max_memory_allocated() ...)`.
    Made True, the flag would print a peak of 0 MB on XLA: it is reported, naming that line,
    with no fix; the device it chose is ported all the same (a safe fix)."""
    source = read("mnist_use_cuda.py")
    (flag,) = [f for f in findings_of(CODE, source, "m.py") if f.span.line == 51]
    assert flag.fix is None and "torch.cuda.max_memory_allocated` (line 73)" in flag.message, flag.message
    fixed = fix_source(source, "m.py", settings(), unsafe=True, select=[CODE]).source
    assert "device = torch_xla.device()" in fixed and "if True" not in fixed
    assert "use_cuda = not args.no_cuda and torch.cuda.is_available()" in fixed


@pytest.mark.parametrize("case", ["mnist_accelerator"])
def test_no_path_keeps_the_model_on_the_cpu(case):
    """After the unsafe fixes nothing asks whether CUDA (or an accelerator) is there,
    and the flag that chose the device no longer depends on it."""
    result = fix_source(read(f"{case}.py"), f"{case}.py", settings(), unsafe=True, select=[CODE])
    # Only a memory query may stay: reported with its XLA counterpart, never made a number.
    for finding in (f for f in result.remaining if f.code == CODE):
        assert finding.fix is None and "get_memory_info(" in finding.message, finding.message
    called = {ast.unparse(n.func) for n in ast.walk(ast.parse(result.source)) if isinstance(n, ast.Call)}
    assert not {name for name in called if "is_available" in name or "current_accelerator" in name}
    assert "torch_xla.device()" in result.source


def test_streams_go_with_every_use_and_timing_events_say_why_they_stay():
    """After the fixes no stream is left, nor a statement that orders streams; the timing
    events stay, reported with the line that keeps them."""
    result = fix_source(read("streams.py"), "streams.py", settings(), unsafe=True, select=[CODE])
    assert result.error is None, result.error
    tree = ast.parse(result.source)
    called = {ast.unparse(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    assert {name for name in called if name.startswith("torch.cuda.")} == {"torch.cuda.Event"}
    methods = {name.rpartition(".")[2] for name in called}
    assert not methods & {"wait_stream", "wait_event", "record_stream", "synchronize", "stream", "device"}
    assert "xm.wait_device_ops" in called
    remaining = [f for f in result.remaining if f.code == CODE]
    assert [f.span.line for f in remaining] == [36, 37]
    assert all("(no fix: line 54 has a use the fix cannot rewrite)" in f.message for f in remaining)


@pytest.mark.parametrize(
    "source, why",
    [
        (
            "import torch\ns = torch.cuda.Stream()\nq = s.query()\n",
            "(no fix: line 3 has a use the fix cannot rewrite)",
        ),
        (
            "import torch\ns = torch.cuda.Stream()\nnext(batches).record_stream(s)\n",
            "(no fix: line 3 does more than order streams)",
        ),
        (
            "import torch\ns = torch.cuda.Stream()\nwith torch.cuda.stream(s) as ctx:\n    print(ctx)\n",
            "(no fix: line 3 has a `with` the fix cannot drop)",
        ),
        (
            "import torch\ns = torch.cuda.Stream()\nrun(model, s)\n",
            "(no fix: line 3 has a use the fix cannot rewrite)",
        ),
    ],
    ids=["query", "side effect", "as name read", "passed on"],
)
def test_a_stream_that_cannot_go_names_the_line(source, why):
    [stream, *_] = [f for f in lint_source(source, "x.py", settings()) if f.code == CODE]
    assert stream.fix is None and why in stream.message, stream.message


@pytest.mark.parametrize(
    "source",
    [
        # The accelerator formatted with the local rank (torchrun scripts).
        "import torch\n"
        "class Runner:\n"
        "    def __init__(self, rank):\n"
        "        self.accel = torch.accelerator.current_accelerator()\n"
        '        self.device = torch.device(f"{self.accel}:{rank}")\n',
        "import torch\n"
        "def setup(rank):\n"
        "    accel = torch.accelerator.current_accelerator()\n"
        "    return torch.device(str(accel) + f':{rank}')\n",
    ],
)
def test_current_accelerator_formatted_into_a_device_string_has_no_fix(source):
    """`current_accelerator()` is a device type without an index; `torch_xla.device()`
    is `xla:0`, and `f"{accel}:{rank}"` would become "xla:0:0", which torch rejects."""
    [finding] = [f for f in lint_source(source, "x.py", settings()) if f.code == CODE]
    assert finding.fix is None
    assert "formats it into a device string: port it by hand" in finding.message
    # Used as a device, and shown in a log line, it is still fixed.
    plain = (
        "import torch\n"
        "class Runner:\n"
        "    def __init__(self):\n"
        "        self.accel = torch.accelerator.current_accelerator()\n"
        '        print(f"running on {self.accel}: {str(self.accel)}")\n'
        "        self.net = Net().to(self.accel)\n"
    )
    [finding] = [f for f in lint_source(plain, "x.py", settings()) if f.code == CODE]
    assert finding.fix is not None


def test_ddp_script_ends_up_consistent():
    """After the safe fixes the torchrun DDP script is XLA's throughout: the xla backend
    with its rendezvous, DDP given this process's XLA device, every `.to(...)` on it, no
    `torch.cuda`; the local rank is still read (the script prints it), never as a device."""
    result = fix_source(read("ddp_torchrun.py"), "ddp_torchrun.py", settings(), select=[CODE])
    assert result.error is None, result.error
    assert [f for f in result.remaining if f.code == CODE] == []
    tree = ast.parse(result.source)
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    assert not [c for c in calls if ast.unparse(c.func).startswith("torch.cuda.")]
    [init] = [c for c in calls if ast.unparse(c.func) == "init_process_group"]
    assert ast.unparse(init) == "init_process_group(backend='xla', init_method='xla://')"
    [ddp] = [c for c in calls if ast.unparse(c.func) == "DDP"]
    assert [(k.arg, ast.unparse(k.value)) for k in ddp.keywords] == [("device_ids", "[torch_xla.device()]")]
    moves = [c for c in calls if isinstance(c.func, ast.Attribute) and c.func.attr == "to"]
    assert len(moves) == 3 and {ast.unparse(c.args[0]) for c in moves} == {"torch_xla.device()"}
    assert "import torch_xla.distributed.xla_backend\n" in result.source
    assert 'self.gpu_id = int(os.environ["LOCAL_RANK"])' in result.source


@pytest.mark.parametrize(
    "call, why",
    [
        ('dist.init_process_group("nccl", store=store, rank=0, world_size=2)', "a `store=`"),
        ('dist.init_process_group("nccl", "env://", timeout, 2, 0)', "rank and world size by position"),
        ('dist.init_process_group("nccl", **options)', "`*args` or `**kwargs`"),
    ],
)
def test_process_group_the_fix_cannot_port_says_why(call, why):
    source = f"import torch.distributed as dist\n{call}\n"
    [finding] = [f for f in lint_source(source, "x.py", settings()) if f.code == CODE]
    assert finding.fix is None and why in finding.message, finding.message


def test_backend_option_and_shared_model_name_the_line():
    """A backend option that defaults to "nccl" is fixed where it is defined; a model
    shared between processes has no fix: each message names the line that makes it so."""
    source = (
        "import torch\n"
        "import torch.distributed as dist\n"
        "parser.add_argument('--backend', type=str, default='nccl')\n"
        "dist.init_process_group(args.backend)\n"
        "model = Net()\n"
        "model.to(device)\n"
        "model.share_memory()\n"
    )
    option, shared = [f for f in lint_source(source, "x.py", settings()) if f.code == CODE]
    assert '`args.backend` defaults to "nccl" (line 3)' in option.message
    fixed = fix_source(source, "x.py", settings(), select=[CODE]).source
    assert 'default="xla")\ndist.init_process_group(args.backend, init_method="xla://")\n' in fixed
    assert shared.fix is None and "line 6 puts `model` on the XLA device" in shared.message
    assert "cannot be shared" in shared.message
    # A model that stays on the CPU can be shared; a dtype is no device.
    cpu = "import torch\nmodel = Net().to(torch.float64)\nmodel.share_memory()\n"
    assert [f for f in lint_source(cpu, "x.py", settings()) if f.code == CODE] == []


def test_command_line_defaults_stay_strings_and_backends_stay_settings():
    """Issue 21: an option's default is what `args.<option>` holds when the command line
    says nothing, a string the script reads as one; it must not become a device, which
    would also be evaluated at import time. The backend stays the user's variable."""
    fixed = fix_source(read("argparse_device.py"), "a.py", settings(), unsafe=True, select=[CODE]).source
    tree = ast.parse(fixed)
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    defaults = {
        ast.unparse(c.args[0]): ast.unparse(k.value)
        for c in calls
        if ast.unparse(c.func) == "parser.add_argument"
        for k in c.keywords
        if k.arg == "default"
    }
    assert defaults == {
        "'--device'": "'xla'",
        "'--eval-device'": "'xla'",
        "'--backend'": "'xla'",
        "'--accelerator'": "'cuda'",
    }
    groups = [ast.unparse(c) for c in calls if ast.unparse(c.func) == "dist.init_process_group"]
    assert groups == [
        "dist.init_process_group(backend, init_method='xla://')",
        "dist.init_process_group(backend=args.backend, init_method='xla://')",
    ]
    assert 'def setup(rank, world_size, backend="xla"):' in fixed
    assert not [c for c in calls if ast.unparse(c.func) in ("torch_xla.device", "xm.xla_device")]


def test_a_backend_parameter_a_caller_sets_has_no_fix():
    source = (
        "import torch.distributed as dist\n"
        "def setup(rank, backend='nccl'):\n"
        "    dist.init_process_group(backend, rank=rank)\n"
        "setup(0, args.backend)\n"
    )
    [finding] = [f for f in lint_source(source, "x.py", settings()) if f.code == CODE]
    assert finding.fix is None
    assert '`backend` defaults to "nccl" (line 2)' in finding.message
    assert "no fix: line 4 passes its own backend `args.backend`" in finding.message
    # A caller that passes "nccl" itself: the default alone would not port the call.
    passing_nccl = source.replace("args.backend", "'nccl'")
    fixed = fix_source(passing_nccl, "x.py", settings(), unsafe=True, select=[CODE]).source
    assert 'def setup(rank, backend="xla"):\n' in fixed and 'setup(0, "xla")\n' in fixed


def test_ddp_device_ids_evaluated_at_import_are_removed_not_replaced():
    # In a spawning script, module-level code runs in the parent before the launcher: the
    # fix may not evaluate the XLA device there, and `torch.device("xla")` has no index.
    source = (
        "import torch_xla\n"
        "import torch_xla.distributed.xla_multiprocessing as xmp\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "model = DDP(net, device_ids=[0])\n"
        "def _mp_fn(index):\n"
        "    pass\n"
        "xmp.spawn(_mp_fn)\n"
    )
    result = fix_source(source, "x.py", settings(), select=[CODE])
    assert result.error is None, result.error
    assert "model = DDP(net)\n" in result.source


# Whole scripts of issue 21 (run on torch_xla by tests/harness/test_port_strings.py): the
# unsafe fix of XLA104 alone, as expected, and a second fix changes nothing.
HARNESS_SCRIPTS = Path(__file__).resolve().parent.parent / "harness" / "scripts"


@pytest.mark.parametrize("name", ["port_gpt_string_device", "port_ddp_assert_cuda", "port_cuda_memory_print"])
def test_issue21_scripts_fix_to_expected(name):
    source = (HARNESS_SCRIPTS / f"{name}.py").read_text()
    fixed = assert_fixes_to(CODE, source, f"{name}.py", read(f"{name}.unsafe.py"), unsafe=True, settings=settings())
    # Never half a selection: no CUDA string, CUDA call or availability test is left,
    # but a memory query (reported: no XLA number to write in its place).
    code = fixed.split('"""', 2)[2]  # after the docstring
    assert "torch.cuda" not in code.replace("torch.cuda.max_memory_allocated()", "") and '"cuda"' not in code


@pytest.mark.parametrize("name", ["port_argparse_device", "port_ddp_setup_backend"])
def test_issue21_command_line_scripts_fix_to_expected(name):
    """The device and the backend come from the command line or a parameter: their
    defaults become "xla", and no XLA device is evaluated when the module is imported."""
    source = (HARNESS_SCRIPTS / f"{name}.py").read_text()
    fixed = assert_fixes_to(CODE, source, f"{name}.py", read(f"{name}.unsafe.py"), unsafe=True, settings=settings())
    code = fixed.split('"""', 2)[2]  # after the docstring
    assert 'parser.add_argument("--device", default="xla"' in code
    assert "torch.cuda" not in code and "nccl" not in code and "torch_xla.device()" not in code


def test_string_device_script_ports_the_selection_and_dtype_together():
    fixed = read("port_gpt_string_device.unsafe.py")
    assert 'device = "xla"\ndevice_type = "xla" if "xla" in device else "cpu"\ndtype = "bfloat16"\n' in fixed
    # The seed runs on XLA: before the availability test, which goes with it (never `if True:`).
    assert "\ntorch_xla.manual_seed(1337)\n" in fixed and "if True" not in fixed


def test_memory_print_keeps_the_users_query_and_names_the_xla_one():
    """Issue 33: the query was rewritten to `0`, and the log printed a fake "0.0 MiB".
    The query stays, reported with `xm.get_memory_info(device)`; the reset goes."""
    fixed = read("port_cuda_memory_print.unsafe.py")
    assert 'print(f"epoch {epoch} peak memory {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB")' in fixed
    assert "reset_peak_memory_stats" not in fixed
    [finding] = [f for f in lint_source(fixed, "port_cuda_memory_print.py", settings()) if f.code == CODE]
    assert finding.fix is None
    assert "`xm.get_memory_info(device)`" in finding.message


def test_the_ported_example_moves_its_model_to_its_own_device_variable():
    """Issue 23: `examples/cuda_port.py` chooses `device` and the port makes it the XLA
    device; `.cuda()` becomes `.to(device)`, not a second `torch_xla.device()`."""
    example = Path(__file__).resolve().parents[2] / "examples" / "cuda_port.py"
    fixed = fix_source(example.read_text(), "cuda_port.py", Settings(), unsafe=True).source
    assert "model = Classifier().to(device)\n" in fixed
    assert "device = torch_xla.device()\n" in fixed
    assert ".to(torch_xla.device())" not in fixed


def test_cuda_tests_that_lead_to_fused_adamw_stay_and_are_named():
    # `fused=True` on XLA parameters raises: the test stays false on XLA, directly or
    # through the variable that carries it; a test that leads elsewhere follows to "xla".
    source = (
        "import torch\n"
        "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
        "device_type = 'cuda' if 'cuda' in device else 'cpu'\n"
        "model = torch.nn.Linear(2, 2).to(device)\n"
        "use_fused = device_type == 'cuda'\n"
        "extra_args = dict(fused=True) if use_fused else dict()\n"
        "opt = torch.optim.AdamW(model.parameters(), **extra_args)\n"
        "opt2 = torch.optim.AdamW(model.parameters(), fused=device in ('cuda', 'cuda:0'))\n"
        "pin = device_type == 'cuda'\n"
    )
    [finding] = [f for f in lint_source(source, "x.py", settings()) if f.code == CODE]
    assert '(lines 5, 8 still test "cuda")' in finding.message
    fixed = assert_fixes_to(
        CODE, source, "x.py", fix_source(source, "x.py", settings(), select=[CODE]).source, unsafe=False
    )
    assert "use_fused = device_type == 'cuda'\n" in fixed
    assert "fused=device in ('cuda', 'cuda:0'))\n" in fixed
    assert "pin = device_type == 'xla'\n" in fixed


def test_ddp_device_ids_are_the_xla_device_call_not_a_variable_ported_to_a_string():
    # nanoGPT: `device` becomes "xla", whose index is None; DDP needs this process's
    # device, index 0, as build-nanogpt gets it.
    source = (
        "import torch\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "device = 'cuda'\n"
        "device_type = 'cuda' if 'cuda' in device else 'cpu'\n"
        "model = DDP(torch.nn.Linear(2, 2).to(device), device_ids=[0])\n"
    )
    fixed = fix_source(source, "x.py", settings(), select=[CODE]).source
    assert "device = 'xla'\n" in fixed or 'device = "xla"\n' in fixed
    assert "device_ids=[torch_xla.device()])\n" in fixed
    [ddp] = [f for f in lint_source(source, "x.py", settings()) if f.code == CODE and "device_ids" in f.message]
    assert ddp.fix.message == "Use `device_ids=[torch_xla.device()]`"


def test_ddp_is_given_the_device_variable_and_an_unused_local_rank_goes():
    fixed = read("ddp_device_variable.fixed.py")
    assert fixed.count("device_ids=[device]") == 2 and fixed.count("device_ids=[torch_xla.device()]") == 1
    # Read only by what the port replaced: removed; still read by a log line: kept.
    assert fixed.count('local_rank = int(os.environ["LOCAL_RANK"])') == 1
    assert 'print(f"local rank {local_rank}")' in fixed


@pytest.mark.parametrize(
    "source, reported",
    [
        ("import os\nimport torch_xla\ndef f():\n    rank = int(os.environ['LOCAL_RANK'])\n", True),
        ("import os\nimport torch_xla\ndef f():\n    rank = os.getenv('LOCAL_RANK', '0')\n", True),
        # Read, or not an XLA script, or a module-level name another module may import.
        ("import os\nimport torch_xla\ndef f():\n    rank = int(os.environ['LOCAL_RANK'])\n    print(rank)\n", False),
        ("import os\nimport torch\ndef f():\n    rank = int(os.environ['LOCAL_RANK'])\n", False),
        ("import os\nimport torch_xla\nrank = int(os.environ['LOCAL_RANK'])\n", False),
        (
            "import os\nimport torch_xla\ndef f():\n    rank = int(os.environ['LOCAL_RANK'])\n    return locals()\n",
            False,
        ),
    ],
)
def test_unused_local_rank_in_an_xla_script(source, reported):
    found = [f for f in lint_source(source, "x.py", settings()) if f.code == CODE and "LOCAL_RANK" in f.message]
    assert bool(found) is reported
    if reported:
        assert found[0].fix.applicability == "safe"
        assert "rank =" not in fix_source(source, "x.py", settings(), select=[CODE]).source


# -- issue 36: a port follows the value ------------------------------------------------------
NEVER_WRITTEN = ("if True:", "if False:", "not True", "not False", "True or", "False and")


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_no_fix_writes_a_constant_test(case):
    """No fix writes `if True:` (or `not True or ...`): a test the port decides is replaced
    by the branch it takes, or keeps no fix."""
    source = read(f"{case}.py")
    fixed = fix_source(source, f"{case}.py", settings(), unsafe=True, select=[CODE]).source
    for text in NEVER_WRITTEN:
        assert fixed.count(text) <= source.count(text), (case, text)


def test_a_flag_whose_tensor_type_is_used_otherwise_keeps_no_fix():
    """Item 1: the type chosen by the flag is passed to a function the fix cannot follow:
    `cuda = True` would make it `torch.cuda.FloatTensor` there, so the flag has no fix."""
    source = (
        "import torch\n"
        "cuda = torch.cuda.is_available()\n"
        "if cuda:\n"
        "    model.cuda()\n"
        "Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\n"
        "x = Tensor([1.0])\n"
        "build(Tensor)\n"
    )
    (flag,) = [f for f in findings_of(CODE, source, "g.py") if f.span.line == 2]
    assert flag.fix is None and "line 7 (`Tensor`)" in flag.message, flag.message
    fixed = fix_source(source, "g.py", settings(), unsafe=True, select=[CODE]).source
    assert "cuda = torch.cuda.is_available()" in fixed and "torch.cuda.FloatTensor if cuda" in fixed


def test_a_flag_that_stays_a_choice_does_not_move_its_tensor_type():
    """`--no-cuda` keeps the CPU path: a type moved to the XLA device whatever the flag says
    would not be where the model is, so the flag keeps no fix."""
    source = (
        "import torch\n"
        "cuda = not args.no_cuda and torch.cuda.is_available()\n"
        "Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\n"
        "x = Tensor([1.0])\n"
    )
    (flag,) = [f for f in findings_of(CODE, source, "g.py") if f.span.line == 2]
    assert flag.fix is None and "even where `cuda` is False" in flag.message, flag.message


def test_cuda_tensor_types_are_reported_in_every_use():
    source = (
        "import torch\n"
        "from torch.cuda import LongTensor\n"
        "a = torch.cuda.ByteTensor(4)\n"
        "b = LongTensor([1, 2])\n"
        "c = a.type(torch.cuda.HalfTensor)\n"
        "ok = isinstance(a, torch.cuda.BoolTensor)\n"
        "torch.set_default_tensor_type(torch.cuda.FloatTensor)\n"
        "known = {torch.Tensor, torch.cuda.FloatTensor}\n"
        "same = type(a) == torch.cuda.ByteTensor\n"
    )
    findings = findings_of(CODE, source, "t.py")
    # Not `isinstance(a, torch.cuda.BoolTensor)`, a set of types or a comparison with one
    # (torch._dynamo's `_in_graph_classes`): asking needs no CUDA. The default type
    # set to a CUDA one is reported (every tensor would be CUDA's), with no fix.
    assert [(f.span.line, f.fix is not None) for f in findings] == [(3, True), (4, True), (5, True), (7, False)]
    fixed = fix_source(source, "t.py", settings(), select=[CODE]).source
    assert "a = torch.ByteTensor(4).to(torch_xla.device())" in fixed
    assert "b = torch.LongTensor([1, 2]).to(torch_xla.device())" in fixed
    assert "c = a.to(torch_xla.device(), torch.float16)" in fixed


def test_correlated_log_tests_are_both_left():
    """Item 2: `{memory}` added under one test and filled under another. Neither is
    rewritten, so the log line works on XLA (the else branch formats without memory)."""
    source = read("log_memory.py")
    fixed = fix_source(source, "l.py", settings(), unsafe=True, select=[CODE]).source
    assert fixed.count("if torch.cuda.is_available():") == 2


def test_a_seed_moves_before_a_test_that_does_more():
    """Item 3: the body also sets cuDNN flags: the seed goes before the test, the rest stays."""
    source = (
        "import torch\n"
        "def setup(seed):\n"
        "    if torch.cuda.is_available():\n"
        "        torch.cuda.manual_seed_all(seed)\n"
        "        torch.backends.cudnn.benchmark = True\n"
    )
    fixed = fix_source(source, "s.py", settings(), select=[CODE]).source
    assert (
        "    torch_xla.manual_seed(seed)\n    if torch.cuda.is_available():\n"
        "        torch.backends.cudnn.benchmark = True\n"
    ) in fixed


def test_seeds_only_test_goes_with_its_seeds():
    """The seed's own text is written as it is (a one-letter `s` is in `manual_seed`), once."""
    source = (
        "import torch\n"
        "def setup(s):\n"
        "    if torch.cuda.is_available():\n"
        "        torch.cuda.manual_seed(s)\n"
        "        torch.cuda.manual_seed_all(s)\n"
        "    return s\n"
    )
    fixed = fix_source(source, "s.py", settings(), select=[CODE]).source
    assert fixed.endswith("def setup(s):\n    torch_xla.manual_seed(s)\n    return s\n"), fixed


def test_a_guard_of_cuda_only_code_names_it():
    """Item 7: the guard protects `torch.cuda.get_device_properties` on line 13."""
    (guard,) = [f for f in findings_of(CODE, read("flash_guard.py"), "f.py") if f.span.line == 11]
    assert guard.fix is None and "torch.cuda.get_device_properties` (line 13)" in guard.message, guard.message
    fixed = fix_source(read("flash_guard.py"), "f.py", settings(), unsafe=True, select=[CODE]).source
    assert "    if not torch.cuda.is_available() or not flash:\n" in fixed
    assert "    if not wide:\n        return 4\n" in fixed


@pytest.mark.parametrize(
    ("test", "fixed"),
    [
        ("if torch.cuda.is_available():\n    a()\nelse:\n    b()\n", "a()\n"),
        ("if not torch.cuda.is_available():\n    a()\nelse:\n    b()\n", "b()\n"),
        ("if not torch.cuda.is_available():\n    a()\n", ""),
        ("if torch.cuda.is_available() or x:\n    a()\n", "a()\n"),
        ("if torch.cuda.is_available() and x:\n    a()\n", "if x:\n    a()\n"),
        ("y = 1 if not torch.cuda.is_available() and x else 2\n", "y = 2\n"),
        ("if x or not torch.cuda.is_available() or z:\n    a()\n", "if x or z:\n    a()\n"),
    ],
)
def test_a_test_is_replaced_by_what_it_takes(test, fixed):
    """The unsafe fix treats the XLA device as available and follows the test's value."""
    source = "import torch\n" + test
    result = fix_source(source, "t.py", settings(), unsafe=True, select=[CODE]).source
    assert result == "import torch\n" + fixed


def test_a_port_only_the_unsafe_fix_completes_says_so(tmp_path):
    """Item 8: with the safe fixes alone the WGAN's flag stays False on XLA and the script
    trains on the CPU. `fix` (and `check`, `fix --diff`) say which fix the port needs;
    not once it is applied, nor for a port the safe fixes complete."""
    import subprocess
    import sys

    from xlalint.engine import reporters

    findings = findings_of(CODE, read("wgan_tensor_type.py"), "w.py")
    (note,) = reporters.port_notes(findings, unsafe=False)
    assert note.startswith("note: w.py:10:16: the port is not complete") and "--unsafe-fixes" in note
    assert reporters.port_notes(findings, unsafe=True) == []
    assert reporters.port_notes(findings_of(CODE, read("log_memory.py"), "l.py"), unsafe=False) == []
    script = tmp_path / "wgan.py"
    script.write_text(read("wgan_tensor_type.py"))
    command = [sys.executable, "-m", "xlalint", "fix", str(script), "--select", CODE, "--no-cache"]
    safe = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert "the port is not complete" in safe.stdout, safe.stdout + safe.stderr
    unsafe = subprocess.run([*command, "--unsafe-fixes"], capture_output=True, text=True, timeout=120)
    assert "the port is not complete" not in unsafe.stdout + unsafe.stderr


@pytest.mark.parametrize(
    ("guarded", "named"),
    [
        ("    x = x.pin_memory()\n", "x.pin_memory()` (line 4)"),
        ("    opt = torch.optim.AdamW(params, fused=True)\n", "fused=True` (line 4)"),
        ("    n = torch.cuda.device_count()\n", "torch.cuda.device_count` (line 4)"),
    ],
)
def test_a_flag_guarding_cuda_only_code_keeps_no_fix(guarded, named):
    """Made True, the flag would run code that needs CUDA on XLA ("Found no NVIDIA driver")."""
    source = "import torch\nuse_cuda = torch.cuda.is_available()\nif use_cuda:\n" + guarded
    (flag,) = [f for f in findings_of(CODE, source, "p.py") if f.span.line == 2]
    assert flag.fix is None and named in flag.message, flag.message


def test_a_test_whose_branch_sets_a_string_setting_is_still_a_port_site():
    """A branch that only keeps text in a variable builds a log line (no port site), but
    `kwargs["ALLOW_TF32"] = "False"` (torch._inductor) or `os.environ[...] = "1"` is a
    setting: what runs differs (turn 6 check of the installed torch)."""
    source = (
        "import os\n"
        "import torch\n"
        "kwargs = {}\n"
        "if torch.cuda.is_available():\n"
        '    kwargs["ALLOW_TF32"] = "False"\n'
        "if torch.cuda.is_available():\n"
        '    os.environ["NCCL_DEBUG"] = "INFO"\n'
        "if torch.cuda.is_available():\n"
        '    note = "on the GPU"\n'
    )
    assert [f.span.line for f in findings_of(CODE, source, "t.py")] == [4, 6]
