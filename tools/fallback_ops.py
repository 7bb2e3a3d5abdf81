"""Measure which torch ops torch_xla runs on the CPU, and write XLA304's table.

    PJRT_DEVICE=CPU python tools/fallback_ops.py [--out xlalint/rules/data/fallback_ops.json] [--work FILE]

Each candidate (the ``torch.*``, ``torch.linalg.*``, ``torch.fft.*``, ``torch.special.*``
and ``torch.nn.functional.*`` functions a training step uses, and a few ``nn`` loss
modules) is called on small tensors on the XLA device, the pending graph is synced, and
the counters of ``torch_xla.debug.metrics.executed_fallback_ops()`` that grew are the
ops that fell back to the CPU. Functions are called with the first argument pattern
that works (one tensor; a tensor and ``dim=0``; two tensors; ...), and reductions both
without and with ``dim`` (``torch.median(x)`` falls back, ``torch.median(x, 0)`` does
not). The candidates run in a worker process; one that crashes the worker is recorded
as such and the next worker goes on after it.

The table is data: the version of torch and torch_xla it was measured on, and for each
function (or module) that fell back, per call form ("plain": one argument; "dim": a second
argument or ``dim=``; "module": calling the module; a mode's name such as "nearest": a
call with that ``mode=``), the aten ops that did ([] for a form measured lowered; a form
not listed was not measured). ``backward_fallbacks`` lists, the same way, the ops that fell
back in the backward of the call's result (the input requires grad and the sum of its
floating-point outputs is differentiated): ``F.interpolate``'s nearest mode is lowered
forward and falls back backward. ``torch.unique`` (and the other data-dependent-shape ops) belong to XLA302 and are
left out.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "xlalint" / "rules" / "data" / "fallback_ops.json"
NAMESPACES = ("torch", "torch.linalg", "torch.fft", "torch.special", "torch.nn.functional")
# XLA302's ops (data-dependent shapes), and functions that are not a step's math
# (factories of their own, RNG state, serialization, global switches, introspection).
EXCLUDED = frozenset(
    {
        "unique",
        "unique_consecutive",
        "nonzero",
        "nonzero_static",
        "argwhere",
        "masked_select",
        "where",
        "save",
        "load",
        "manual_seed",
        "seed",
        "initial_seed",
        "set_rng_state",
        "get_rng_state",
        "compile",
        "export",
        "vmap",
        "cond",
        "from_numpy",
        "frombuffer",
        "from_file",
        "from_dlpack",
        "empty_strided",
        "as_strided",
        "as_strided_",
        "as_strided_scatter",
        "sym_int",
        "sym_float",
        "sym_max",
        "sym_min",
        "sym_not",
        "sym_ite",
        "sym_sum",
        "typename",
        "pad_packed_sequence",
        "use_deterministic_algorithms",
        "set_default_dtype",
        "set_default_device",
        "set_default_tensor_type",
        "set_printoptions",
        "set_num_threads",
        "set_num_interop_threads",
        "set_grad_enabled",
        "set_flush_denormal",
        "set_warn_always",
        "set_float32_matmul_precision",
        "set_deterministic_debug_mode",
        "is_tensor",
        "is_storage",
        "is_grad_enabled",
        "is_inference_mode_enabled",
        "is_nonzero",
        "numel",
        "result_type",
        "can_cast",
        "promote_types",
        "broadcast_shapes",
        "get_default_dtype",
        "get_device",
        "sparse_coo_tensor",
        "sparse_csr_tensor",
        "sparse_csc_tensor",
        "sparse_bsr_tensor",
        "sparse_bsc_tensor",
        "sparse_compressed_tensor",
        "quantize_per_tensor",
        "quantize_per_channel",
        "quantize_per_tensor_dynamic",
        "fake_quantize_per_tensor_affine",
        "fake_quantize_per_channel_affine",
    }
)
# Words in names of functions that are no step's math.
_SKIPPED_WORDS = (
    *("quantiz", "sparse", "mkldnn", "cudnn", "miopen", "fbgemm", "_jit", "vulkan", "_nnpack", "packed"),
    *("autocast", "profiler", "ir_module", "parse_", "vitals", "fork", "multiprocessing", "num_threads"),
    *("classproperty", "type_comment", "cxx11", "deterministic"),
)

# Candidates that need arguments of their own: (function, form, code on `x`, `i`, `d`).
# Forms: "plain" (one argument), "dim" (a second argument or `dim=`), "module" (a module's call).
# `x` is a float tensor on the device, `i` an int64 one, `d` the device.
SPECIAL_CALLS = [
    ("torch.bincount", "plain", "torch.bincount(i.flatten())"),
    ("torch.histc", "plain", "torch.histc(x, bins=4)"),
    ("torch.histogram", "plain", "torch.histogram(x, bins=4)"),
    ("torch.searchsorted", "plain", "torch.searchsorted(torch.sort(x.flatten())[0], x)"),
    ("torch.bucketize", "plain", "torch.bucketize(x, torch.sort(x.flatten())[0])"),
    ("torch.multinomial", "plain", "torch.multinomial(x.abs() + 0.1, 2)"),
    ("torch.embedding", "plain", "torch.embedding(x, i % 4)"),
    ("torch.gather", "dim", "torch.gather(x, 1, i % 4)"),
    ("torch.scatter", "dim", "torch.scatter(x, 1, i % 4, x)"),
    ("torch.scatter_add", "dim", "torch.scatter_add(x, 1, i % 4, x)"),
    ("torch.scatter_reduce", "dim", "torch.scatter_reduce(x, 1, i % 4, x, reduce='amax')"),
    ("torch.index_select", "dim", "torch.index_select(x, 0, i[0] % 4)"),
    ("torch.index_add", "dim", "torch.index_add(x, 0, i[0] % 4, x)"),
    ("torch.index_put", "plain", "torch.index_put(x, (i[0] % 4,), x[0])"),
    ("torch.take", "plain", "torch.take(x, i % 16)"),
    ("torch.take_along_dim", "dim", "torch.take_along_dim(x, i % 4, dim=1)"),
    ("torch.masked_fill", "plain", "torch.masked_fill(x, x > 0, 0.0)"),
    ("torch.masked_scatter", "plain", "torch.masked_scatter(x, x > 0, x)"),
    ("torch.topk", "plain", "torch.topk(x, 2)"),
    ("torch.kthvalue", "plain", "torch.kthvalue(x, 2)"),
    ("torch.norm", "plain", "torch.norm(x)"),
    ("torch.norm", "dim", "torch.norm(x, dim=1)"),
    ("torch.copysign", "dim", "torch.copysign(x, x)"),
    ("torch.isin", "dim", "torch.isin(x, x[0])"),
    ("torch.quantile", "plain", "torch.quantile(x, 0.5)"),
    ("torch.quantile", "dim", "torch.quantile(x, 0.5, dim=0)"),
    ("torch.nanquantile", "plain", "torch.nanquantile(x, 0.5)"),
    ("torch.cdist", "plain", "torch.cdist(x, x)"),
    ("torch.einsum", "plain", "torch.einsum('ij,jk->ik', x, x)"),
    ("torch.tensordot", "plain", "torch.tensordot(x, x, dims=1)"),
    ("torch.cartesian_prod", "plain", "torch.cartesian_prod(x[0], x[1])"),
    ("torch.combinations", "plain", "torch.combinations(x[0])"),
    ("torch.block_diag", "plain", "torch.block_diag(x, x)"),
    ("torch.cat", "dim", "torch.cat([x, x], 0)"),
    ("torch.stack", "dim", "torch.stack([x, x])"),
    ("torch.repeat_interleave", "plain", "torch.repeat_interleave(x, 2, dim=0)"),
    ("torch.roll", "plain", "torch.roll(x, 1, 0)"),
    ("torch.diff", "plain", "torch.diff(x)"),
    ("torch.trapezoid", "plain", "torch.trapezoid(x)"),
    ("torch.cumsum", "dim", "torch.cumsum(x, 0)"),
    ("torch.cumprod", "dim", "torch.cumprod(x, 0)"),
    ("torch.cummax", "dim", "torch.cummax(x, 0)"),
    ("torch.cummin", "dim", "torch.cummin(x, 0)"),
    ("torch.logcumsumexp", "dim", "torch.logcumsumexp(x, 0)"),
    ("torch.clamp", "plain", "torch.clamp(x, -0.5, 0.5)"),
    ("torch.lerp", "plain", "torch.lerp(x, x * 2, 0.5)"),
    ("torch.polygamma", "plain", "torch.polygamma(1, x.abs() + 1)"),
    ("torch.mvlgamma", "plain", "torch.mvlgamma(x.abs() + 2, 2)"),
    ("torch.linalg.eigh", "plain", "torch.linalg.eigh(x @ x.T)"),
    ("torch.linalg.cholesky", "plain", "torch.linalg.cholesky(x @ x.T + 4 * torch.eye(4, device=d))"),
    ("torch.linalg.solve", "plain", "torch.linalg.solve(x @ x.T + 4 * torch.eye(4, device=d), x)"),
    ("torch.linalg.lstsq", "plain", "torch.linalg.lstsq(x, x)"),
    ("torch.linalg.matrix_power", "plain", "torch.linalg.matrix_power(x, 2)"),
    ("torch.linalg.vector_norm", "plain", "torch.linalg.vector_norm(x)"),
    ("torch.linalg.matrix_norm", "plain", "torch.linalg.matrix_norm(x)"),
    ("torch.fft.fft", "plain", "torch.fft.fft(x)"),
    ("torch.fft.ifft", "plain", "torch.fft.ifft(x)"),
    ("torch.fft.rfft", "plain", "torch.fft.rfft(x)"),
    ("torch.fft.irfft", "plain", "torch.fft.irfft(torch.fft.rfft(x.cpu()).to(d))"),
    ("torch.fft.fft2", "plain", "torch.fft.fft2(x)"),
    ("torch.fft.rfft2", "plain", "torch.fft.rfft2(x)"),
    ("torch.fft.fftn", "plain", "torch.fft.fftn(x)"),
    ("torch.fft.rfftn", "plain", "torch.fft.rfftn(x)"),
    ("torch.stft", "plain", "torch.stft(x.flatten(), 4, return_complex=True)"),
    (
        "torch.nn.functional.ctc_loss",
        "plain",
        "F.ctc_loss(x.log_softmax(1)[:, None, :].expand(4, 2, 4).contiguous(), torch.ones(2, 2, dtype=torch.long, device=d), torch.tensor([4, 4], device=d), torch.tensor([2, 2], device=d))",
    ),
    ("torch.nn.functional.cross_entropy", "plain", "F.cross_entropy(x, i[0] % 4)"),
    ("torch.nn.functional.nll_loss", "plain", "F.nll_loss(x.log_softmax(1), i[0] % 4)"),
    ("torch.nn.functional.multi_margin_loss", "plain", "F.multi_margin_loss(x, i[0] % 4)"),
    ("torch.nn.functional.multilabel_margin_loss", "plain", "F.multilabel_margin_loss(x, i % 4)"),
    ("torch.nn.functional.embedding", "plain", "F.embedding(i % 4, x)"),
    ("torch.nn.functional.embedding_bag", "plain", "F.embedding_bag(i % 4, x)"),
    ("torch.nn.functional.one_hot", "plain", "F.one_hot(i % 4, 4)"),
    ("torch.nn.functional.conv1d", "plain", "F.conv1d(x[None], x[:, :, None])"),
    ("torch.nn.functional.conv2d", "plain", "F.conv2d(x[None, None], x[None, None, :2, :2])"),
    ("torch.nn.functional.conv_transpose2d", "plain", "F.conv_transpose2d(x[None, None], x[None, None, :2, :2])"),
    ("torch.nn.functional.max_pool1d", "plain", "F.max_pool1d(x[None], 2)"),
    ("torch.nn.functional.max_pool2d", "plain", "F.max_pool2d(x[None, None], 2)"),
    ("torch.nn.functional.avg_pool2d", "plain", "F.avg_pool2d(x[None, None], 2)"),
    ("torch.nn.functional.adaptive_avg_pool2d", "plain", "F.adaptive_avg_pool2d(x[None, None], 3)"),
    ("torch.nn.functional.adaptive_max_pool2d", "plain", "F.adaptive_max_pool2d(x[None, None], 3)"),
    ("torch.nn.functional.fractional_max_pool2d", "plain", "F.fractional_max_pool2d(x[None, None], 2, output_size=2)"),
    ("torch.nn.functional.lp_pool2d", "plain", "F.lp_pool2d(x[None, None], 2, 2)"),
    ("torch.nn.functional.interpolate", "plain", "F.interpolate(x[None, None], scale_factor=2, mode='bilinear')"),
    ("torch.nn.functional.interpolate", "nearest", "F.interpolate(x[None, None], scale_factor=2)"),
    (
        "torch.nn.functional.grid_sample",
        "plain",
        "F.grid_sample(x[None, None], x[None, :, :2].reshape(1, 2, 2, 2), align_corners=False)",
    ),
    ("torch.nn.functional.affine_grid", "plain", "F.affine_grid(x[None, :2, :3], [1, 1, 4, 4], align_corners=False)"),
    ("torch.nn.functional.pixel_shuffle", "plain", "F.pixel_shuffle(x[None, :, None], 2)"),
    ("torch.nn.functional.unfold", "plain", "F.unfold(x[None, None], 2)"),
    ("torch.nn.functional.fold", "plain", "F.fold(x[None], (3, 3), 2)"),
    ("torch.nn.functional.pad", "plain", "F.pad(x, (1, 1))"),
    ("torch.nn.functional.pad", "reflect", "F.pad(x[None], (1, 1), mode='reflect')"),
    ("torch.nn.functional.layer_norm", "plain", "F.layer_norm(x, (4,))"),
    ("torch.nn.functional.group_norm", "plain", "F.group_norm(x[None], 2)"),
    ("torch.nn.functional.batch_norm", "plain", "F.batch_norm(x, None, None, training=True)"),
    ("torch.nn.functional.instance_norm", "plain", "F.instance_norm(x[None])"),
    ("torch.nn.functional.local_response_norm", "plain", "F.local_response_norm(x[None], 2)"),
    ("torch.nn.functional.normalize", "plain", "F.normalize(x)"),
    ("torch.nn.functional.dropout", "plain", "F.dropout(x, 0.5)"),
    ("torch.nn.functional.gumbel_softmax", "plain", "F.gumbel_softmax(x)"),
    (
        "torch.nn.functional.scaled_dot_product_attention",
        "plain",
        "F.scaled_dot_product_attention(x[None], x[None], x[None])",
    ),
    (
        "torch.nn.functional.multi_head_attention_forward",
        "plain",
        "F.multi_head_attention_forward(x[:, None], x[:, None], x[:, None], 4, 1, torch.cat([x, x, x]), None, None, None, False, 0.0, x, None)",
    ),
    ("torch.nn.functional.cosine_similarity", "plain", "F.cosine_similarity(x, x)"),
    ("torch.nn.functional.pairwise_distance", "plain", "F.pairwise_distance(x, x)"),
    ("torch.nn.functional.pdist", "plain", "F.pdist(x)"),
    ("torch.nn.functional.triplet_margin_loss", "plain", "F.triplet_margin_loss(x, x, x)"),
    ("torch.nn.functional.margin_ranking_loss", "plain", "F.margin_ranking_loss(x[0], x[1], x[2].sign())"),
    ("torch.nn.functional.poisson_nll_loss", "plain", "F.poisson_nll_loss(x, x.abs())"),
    ("torch.nn.functional.gaussian_nll_loss", "plain", "F.gaussian_nll_loss(x, x, x.abs() + 1)"),
    ("torch.nn.functional.kl_div", "plain", "F.kl_div(x.log_softmax(1), x.softmax(1), reduction='batchmean')"),
    ("torch.nn.functional.binary_cross_entropy", "plain", "F.binary_cross_entropy(x.sigmoid(), x.sigmoid())"),
    (
        "torch.nn.functional.binary_cross_entropy_with_logits",
        "plain",
        "F.binary_cross_entropy_with_logits(x, x.sigmoid())",
    ),
    ("torch.nn.functional.huber_loss", "plain", "F.huber_loss(x, x * 2)"),
    ("torch.nn.functional.smooth_l1_loss", "plain", "F.smooth_l1_loss(x, x * 2)"),
    ("torch.nn.functional.soft_margin_loss", "plain", "F.soft_margin_loss(x, x.sign())"),
    ("torch.nn.functional.multilabel_soft_margin_loss", "plain", "F.multilabel_soft_margin_loss(x, (x > 0).float())"),
    ("torch.nn.functional.hinge_embedding_loss", "plain", "F.hinge_embedding_loss(x, x.sign())"),
    ("torch.nn.functional.cosine_embedding_loss", "plain", "F.cosine_embedding_loss(x, x, x[0].sign())"),
    ("torch.nn.functional.rrelu", "plain", "F.rrelu(x, training=True)"),
    ("torch.nn.functional.prelu", "plain", "F.prelu(x, x[0, :1])"),
    ("torch.nn.functional.glu", "plain", "F.glu(x)"),
    ("torch.nn.functional.threshold", "plain", "F.threshold(x, 0.1, 0.0)"),
    ("torch.nn.functional.softmax", "dim", "F.softmax(x, 1)"),
    ("torch.nn.functional.log_softmax", "dim", "F.log_softmax(x, 1)"),
    ("torch.nn.functional.softmin", "dim", "F.softmin(x, 1)"),
    (
        "torch.nn.CTCLoss",
        "module",
        "nn.CTCLoss()(x.log_softmax(1)[:, None, :].expand(4, 2, 4).contiguous(), torch.ones(2, 2, dtype=torch.long, device=d), torch.tensor([4, 4], device=d), torch.tensor([2, 2], device=d))",
    ),
    ("torch.nn.MultiMarginLoss", "module", "nn.MultiMarginLoss()(x, i[0] % 4)"),
    ("torch.nn.MultiLabelMarginLoss", "module", "nn.MultiLabelMarginLoss()(x, i % 4)"),
    ("torch.nn.EmbeddingBag", "module", "nn.EmbeddingBag(4, 4).to(d)(i % 4)"),
    ("torch.nn.AdaptiveLogSoftmaxWithLoss", "module", "nn.AdaptiveLogSoftmaxWithLoss(4, 8, [2]).to(d)(x, i[0] % 8)"),
    ("torch.nn.FractionalMaxPool2d", "module", "nn.FractionalMaxPool2d(2, output_size=2)(x[None, None])"),
    ("torch.nn.RNN", "module", "nn.RNN(4, 4).to(d)(x[:, None])"),
    ("torch.nn.LSTM", "module", "nn.LSTM(4, 4).to(d)(x[:, None])"),
    ("torch.nn.GRU", "module", "nn.GRU(4, 4).to(d)(x[:, None])"),
]
# Argument patterns tried, in order, for every other function: (form, code).
PATTERNS = [
    ("plain", "f(x)"),
    ("dim", "f(x, 0)"),
    ("plain", "f(x, x)"),
    ("plain", "f(x, x, x)"),
    ("plain", "f(x.abs() + 0.5)"),
    ("plain", "f(i)"),
    ("plain", "f(i, i)"),
    ("plain", "f(x > 0)"),
    ("plain", "f(x, 2)"),
    ("plain", "f(x, 0.5)"),
    ("plain", "f(x[0])"),
    ("plain", "f([x, x])"),
]
# Reductions that take an optional `dim`: measured both ways.
WITH_AND_WITHOUT_DIM = ("f(x)", "f(x, 0)")


def candidates() -> list[tuple[str, str, str]]:
    """(qualified function, form, call code) for every measurement."""
    import torch
    import torch.nn.functional as F

    special = {name for name, _form, _code in SPECIAL_CALLS}
    found = list(SPECIAL_CALLS)
    modules = {"torch": torch, "torch.linalg": torch.linalg, "torch.fft": torch.fft}
    modules.update({"torch.special": torch.special, "torch.nn.functional": F})
    for prefix in NAMESPACES:
        module = modules[prefix]
        for name in sorted(dir(module)):
            qualified = f"{prefix}.{name}"
            if qualified in special or not _is_candidate(module, name):
                continue
            found.append((qualified, "*", ""))
    return found


def _is_candidate(module, name: str) -> bool:
    if name.startswith("_") or name.endswith("_") or name in EXCLUDED or not name.islower():
        return False
    if any(word in name for word in _SKIPPED_WORDS) or name.startswith(("is_", "set_", "get_", "use_")):
        return False
    value = getattr(module, name, None)
    return callable(value) and not isinstance(value, type)


# -- the worker: runs the candidates from --start, one line of JSON per candidate --------


def work(start: int, results: Path) -> None:
    import torch
    import torch.nn.functional as F
    import torch_xla
    import torch_xla.debug.metrics as met
    from torch import nn

    device = torch_xla.device()
    gen = torch.Generator().manual_seed(0)
    x_cpu = torch.randn(4, 4, generator=gen)
    i_cpu = torch.randint(0, 8, (4, 4), generator=gen)

    def counters() -> dict[str, int]:
        return {op: int(met.counter_value(op) or 0) for op in met.executed_fallback_ops()}

    def measure(code: str, f) -> tuple[list[str], list[str]] | None:
        """The ops that fell back in the call, and in the backward of its result (a
        training step differentiates what it computes): None when the call fails."""
        x = x_cpu.to(device).requires_grad_()
        i = i_cpu.to(device)
        torch_xla.sync()
        before = counters()
        scope = {"torch": torch, "F": F, "nn": nn, "x": x, "i": i, "d": device, "f": f}
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            try:
                result = eval(code, scope)
                torch_xla.sync()
            except Exception:
                with contextlib.suppress(Exception):  # the failed op's pending graph
                    torch_xla.sync()
                return None
            forward = counters()
            with contextlib.suppress(Exception):  # no gradient through it: no backward ops
                differentiable = [t for t in _tensors(result) if t.requires_grad and t.is_floating_point()]
                if differentiable:
                    sum(t.float().sum() for t in differentiable).backward()
                    torch_xla.sync()
            with contextlib.suppress(Exception):
                torch_xla.sync()
        after = counters()
        grown = sorted(op for op, count in forward.items() if count > before.get(op, 0))
        backward = sorted(op for op, count in after.items() if count > forward.get(op, 0))
        return grown, backward

    todo = candidates()
    with open(results, "a", encoding="utf-8") as out:
        for index in range(start, len(todo)):
            qualified, form, code = todo[index]
            out.write(json.dumps({"index": index, "started": True}) + "\n")
            out.flush()
            records = []
            if form != "*":
                ops = measure(code, None)
                if ops is not None:
                    records.append((form, *ops))
            else:
                f = _resolve(qualified)
                tried = set()
                for form_tried, pattern in PATTERNS:
                    if form_tried in tried:
                        continue
                    ops = measure(pattern, f)
                    if ops is None:
                        continue
                    records.append((form_tried, *ops))
                    tried.add(form_tried)
                    # A reduction that takes `dim`: measure it with one too.
                    if pattern == WITH_AND_WITHOUT_DIM[0]:
                        dim_ops = measure(WITH_AND_WITHOUT_DIM[1], f)
                        if dim_ops is not None:
                            records.append(("dim", *dim_ops))
                    break
            out.write(json.dumps({"index": index, "name": qualified, "measured": records}) + "\n")
            out.flush()


def _tensors(result) -> list:
    """The tensors of a call's result (a tensor, or a tuple/named tuple of them)."""
    import torch

    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)):
        return [t for item in result for t in _tensors(item)]
    return []


def _resolve(qualified: str):
    import importlib

    module, _, name = qualified.rpartition(".")
    return getattr(importlib.import_module(module), name)


# -- the parent: restarts the worker after a crash, then writes the table --------------


def measure_all(out: Path, timeout_s: float, work: Path | None = None) -> dict:
    import torch
    import torch_xla

    total = len(candidates())
    with tempfile.TemporaryDirectory() as folder:
        results = work or Path(folder) / "results.jsonl"
        results.touch()
        # Go on after the last candidate a previous run of the same work file finished.
        done = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()]
        start = max((r["index"] + 1 for r in done if "name" in r), default=0)
        while start < total:
            env = {**os.environ, "PJRT_DEVICE": "CPU"}
            command = [sys.executable, __file__, "--worker", str(start), "--results", str(results)]
            with contextlib.suppress(subprocess.TimeoutExpired):  # a hung candidate: skipped like a crash
                subprocess.run(command, env=env, timeout=timeout_s, check=False, stdin=subprocess.DEVNULL)
            done = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()]
            finished = {r["index"] for r in done if "name" in r}
            started = [r["index"] for r in done if r.get("started")]
            last = max(started, default=start - 1)
            if last >= total - 1 and last in finished:
                break
            start = last + 1
        records = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()]
        finished = {r["index"] for r in records if "name" in r}
        started = {r["index"] for r in records if r.get("started")}
        crashed = [candidates()[index][0] for index in sorted(started - finished)]
    return write_table(records, total, crashed, out, torch.__version__, torch_xla.__version__)


def write_table(records: list[dict], total: int, crashed: list[str], out: Path, torch_version, xla_version) -> dict:
    """Write the table from the worker's records (atomically)."""
    measured = [r for r in records if "name" in r]
    fallbacks: dict[str, dict[str, list[str]]] = {}
    backward: dict[str, dict[str, list[str]]] = {}
    lowered = 0
    for record in measured:
        for form, ops, *backward_ops in record["measured"]:
            if ops:
                fallbacks.setdefault(record["name"], {})[form] = ops
            else:
                lowered += 1
            if backward_ops and backward_ops[0]:
                backward.setdefault(record["name"], {})[form] = backward_ops[0]
    # The forms measured lowered of a function that falls back in another form: [] (a
    # form not listed was not measured).
    for record in measured:
        for form, ops, *_backward in record["measured"]:
            if not ops and record["name"] in fallbacks:
                fallbacks[record["name"]].setdefault(form, [])
    table = {
        "about": "torch ops that torch_xla runs on the CPU (executed_fallback_ops), written by tools/fallback_ops.py",
        "torch": torch_version.split("+")[0],
        "torch_xla": xla_version.split("+")[0],
        "device": "CPU",
        "candidates": total,
        "calls_that_ran": sum(len(r["measured"]) for r in measured),
        "calls_lowered": lowered,
        "crashed": sorted(crashed),
        "fallbacks": dict(sorted(fallbacks.items())),
        "backward_fallbacks": dict(sorted(backward.items())),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    temporary = out.with_suffix(".tmp")
    temporary.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    os.replace(temporary, out)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds per worker")
    parser.add_argument("--work", type=Path, help="keep the measurements in this file and resume from it")
    parser.add_argument("--table-only", action="store_true", help="write the table from --work, measuring nothing")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--results", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.table_only:
        import torch
        import torch_xla

        records = [json.loads(line) for line in args.work.read_text(encoding="utf-8").splitlines()]
        finished = {r["index"] for r in records if "name" in r}
        crashed = [candidates()[r["index"]][0] for r in records if r.get("started") and r["index"] not in finished]
        table = write_table(
            records, len(candidates()), sorted(set(crashed)), args.out, torch.__version__, torch_xla.__version__
        )
        print(f"{len(table['fallbacks'])} functions fall back: written to {args.out}")
        return
    if args.worker is not None:
        work(args.worker, args.results)
        return
    table = measure_all(args.out, args.timeout, args.work)
    print(
        f"{table['calls_that_ran']} calls of {table['candidates']} candidates ran; "
        f"{len(table['fallbacks'])} fall back: written to {args.out}"
    )


if __name__ == "__main__":
    main()
