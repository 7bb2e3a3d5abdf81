"""The command-line options (xlalint.analysis.options) and how device values are read
(xlalint.analysis.device_reads): the facts XLA104 asks before it ports a device default."""

from __future__ import annotations

import ast
import textwrap

from xlalint.analysis.device_reads import DeviceReads
from xlalint.analysis.options import CommandLineOptions
from xlalint.analysis.semantic import attach_parents
from xlalint.engine.config import Settings
from xlalint.engine.context import Context


def analyses(source: str) -> tuple[CommandLineOptions, DeviceReads]:
    source = textwrap.dedent(source)
    tree = ast.parse(source)
    attach_parents(tree)
    ctx = Context(source, "train.py", tree, Settings())
    options = CommandLineOptions(ctx.semantic)
    return options, DeviceReads(ctx.semantic, ctx.devices, options)


def test_destinations_and_defaults():
    options, _ = analyses(
        """
        parser.add_argument("-d", "--eval-device", default="cuda:0")
        parser.add_argument("--backend", dest="dist_backend", default="nccl")
        parser.add_argument("steps", type=int)
        """
    )
    declared = {o.destination: (ast.unparse(o.default) if o.default else None) for o in options.declared}
    assert declared == {"eval_device": "'cuda:0'", "dist_backend": "'nccl'", "steps": None}


def test_only_the_parsed_namespace_reads_an_option():
    """`opt, _ = parser.parse_known_args()` names the namespace: `opt.device` (also as a
    parameter of that name) reads the option, `batch.device` does not."""
    options, _ = analyses(
        """
        parser.add_argument("--device", default="cuda")
        opt, _ = parser.parse_known_args()
        def main(opt, batch):
            return opt.device, batch.device
        """
    )
    [option] = options.declared
    assert [ast.unparse(r.value) for r in options.reads(option)] == ["opt"]


def test_without_a_parse_call_any_name_but_self_may_be_the_namespace():
    options, _ = analyses(
        """
        parser.add_argument("--device", default="cuda")
        def main(args):
            return args.device, self.device
        """
    )
    [option] = options.declared
    assert [ast.unparse(r.value) for r in options.reads(option)] == ["args"]


def test_reads_of_an_option_follow_a_copy():
    options, reads = analyses(
        """
        parser.add_argument("--device", default="cuda")
        args = parser.parse_args()
        def train(model):
            device = args.device
            model.to(device)
            kind = "cuda" if "cuda" in device else "cpu"
            return torch.autocast(kind)
        """
    )
    [option] = options.declared
    found = reads.option_reads(option)
    assert [ast.unparse(r) for r in found] == ["args.device", "device", "device"]
    assert reads.read_as_device(found)
    assert ast.unparse(reads.read_as_string(found)) == "'cuda' in device"
    assert [ast.unparse(d) for d in reads.derived_device_types(found)] == ["'cuda' if 'cuda' in device else 'cpu'"]
    assert not reads.read_as_device_type(found)


def test_a_device_only_printed_is_read_neither_as_device_nor_as_string():
    options, reads = analyses(
        """
        parser.add_argument("--device", default="cuda")
        args = parser.parse_args()
        print(args.device, f"{args.device}")
        """
    )
    found = reads.option_reads(options.declared[0])
    assert len(found) == 2
    assert not reads.read_as_device(found) and reads.read_as_string(found) is None
