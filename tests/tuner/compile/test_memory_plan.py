"""`intermediate_buffers` (tuner/compile/memory_plan.py): values share memory only when their
lifetimes do not overlap, on the call graphs of real models."""

from __future__ import annotations

import numpy as np
import pytest

from msdb.model import zoo
from msdb.model.lower import lower
from msdb.model.onnx_frontend import from_onnx
from msdb.tuner.compile.memory_plan import intermediate_buffers

pytest.importorskip("onnx", reason="the zoo's models are ONNX (msdb[onnx])")


def _lifetimes(model):
    """Per value the calls write: (index of the call that writes it, index of its last reader)."""
    written = {name: i for i, call in enumerate(model.calls) for name in call.outputs}
    last = dict(written)
    for i, call in enumerate(model.calls):
        for name in call.args:
            if name in last:
                last[name] = i
    return {name: (written[name], last[name]) for name in written}


@pytest.mark.parametrize("fuse", ["tvm", "nchwc"])
def test_values_share_memory_only_when_one_is_dead_before_the_other_is_written(fuse: str) -> None:
    model = lower(from_onnx(zoo.mobilenet_v2(image=32, width=0.5, num_classes=10)), fuse)
    buffers = intermediate_buffers(model)
    lifetimes = _lifetimes(model)
    assert set(buffers) == set(lifetimes)
    names = sorted(buffers)
    shared = 0
    for i, a in enumerate(names):
        assert buffers[a].shape == model.values[a].shape and buffers[a].flags.c_contiguous
        for b in names[i + 1:]:
            if np.shares_memory(buffers[a], buffers[b]):
                shared += 1
                (wa, la), (wb, lb) = lifetimes[a], lifetimes[b]
                assert la < wb or lb < wa, (a, b, lifetimes[a], lifetimes[b])
    assert shared > len(names)  # a chain of convs reuses a few blocks over and over
    for name in model.outputs:  # the outputs are the caller's: never shared
        assert not any(np.shares_memory(buffers[name], buffers[other]) for other in names if other != name)
    planned = sum({id(b.base if b.base is not None else b): b.base.nbytes if b.base is not None else b.nbytes
                   for b in buffers.values()}.values())
    assert planned < sum(b.nbytes for b in buffers.values()) / 2


def test_a_call_never_writes_over_what_it_reads() -> None:
    """A call's outputs take their memory before its inputs are freed: an elementwise op whose
    input dies there still gets a separate output (a conv's window would read what it wrote)."""
    model = lower(from_onnx(zoo.resnet(18, image=32, width=8, num_classes=10)), "nchwc")
    buffers = intermediate_buffers(model)
    for call in model.calls:
        for out in call.outputs:
            for arg in call.args:
                if arg in buffers:
                    assert not np.shares_memory(buffers[out], buffers[arg]), (call.function, out, arg)
