"""`intermediate_buffers` (tuner/compile/memory_plan.py): values share memory only when their
lifetimes do not overlap, or when a call writes an output in place of an input it reads for the
last time (`in_place_inputs`, tuner/compile/in_place.py), on the call graphs of real models."""

from __future__ import annotations

import numpy as np
import pytest

from msdb.model import zoo
from msdb.model.lower import lower
from msdb.model.onnx_frontend import from_onnx
from msdb.tuner.compile.in_place import in_place_inputs
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


def _in_place_pairs(model):
    """(output, input) for every output a call may write over one of its inputs."""
    pairs = set()
    for call in model.calls:
        for out, arg in in_place_inputs(model.functions[call.function], len(call.args)).items():
            pairs.add((call.outputs[out - len(call.args)], call.args[arg]))
    return pairs


@pytest.mark.parametrize("fuse", ["tvm", "nchwc"])
def test_values_share_memory_only_when_one_is_dead_before_the_other_is_written(fuse: str) -> None:
    model = lower(from_onnx(zoo.mobilenet_v2(image=32, width=0.5, num_classes=10)), fuse)
    buffers = intermediate_buffers(model)
    lifetimes = _lifetimes(model)
    in_place = _in_place_pairs(model)
    assert set(buffers) == set(lifetimes)
    names = sorted(buffers)
    shared = 0
    for i, a in enumerate(names):
        assert buffers[a].shape == model.values[a].shape and buffers[a].flags.c_contiguous
        for b in names[i + 1:]:
            if np.shares_memory(buffers[a], buffers[b]):
                shared += 1
                (wa, la), (wb, lb) = lifetimes[a], lifetimes[b]
                assert la < wb or lb < wa or (b, a) in in_place or (a, b) in in_place, (a, b, lifetimes[a], lifetimes[b])
    assert shared > len(names)  # a chain of convs reuses a few blocks over and over
    for name in model.outputs:  # the outputs are the caller's: never shared
        assert not any(np.shares_memory(buffers[name], buffers[other]) for other in names if other != name)
    planned = sum({id(b.base if b.base is not None else b): b.base.nbytes if b.base is not None else b.nbytes
                   for b in buffers.values()}.values())
    assert planned < sum(b.nbytes for b in buffers.values()) / 2


def test_a_call_writes_over_what_it_reads_only_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call's outputs take their memory before its inputs are freed, so a conv's window never
    reads what the conv wrote; the one exception is an output computed element by element from
    an input read there for the last time (ResNet's residual add), which takes that input's
    memory, and the model computes what it computed with separate memory."""
    import msdb.tuner.compile.memory_plan as memory_plan
    from msdb.tuner.compile.compiler import compile_model

    model = lower(from_onnx(zoo.resnet(18, image=32, width=8, num_classes=10)), "nchwc")
    buffers = intermediate_buffers(model)
    in_place = _in_place_pairs(model)
    shared = []
    for call in model.calls:
        for out in call.outputs:
            for arg in call.args:
                if arg in buffers and np.shares_memory(buffers[out], buffers[arg]):
                    assert (out, arg) in in_place, (call.function, out, arg)
                    assert buffers[out].shape == buffers[arg].shape
                    shared.append(out)
    assert len(shared) >= 4  # each residual block's last conv adds the shortcut in place

    inputs = {info.name: np.random.default_rng(0).standard_normal(info.shape).astype(info.dtype)
              for info in model.inputs}
    planned = compile_model(model).run(inputs)
    monkeypatch.setattr(memory_plan, "in_place_inputs", lambda func, inputs: {})
    separate = compile_model(model).run(inputs)
    for a, b in zip(planned, separate):
        np.testing.assert_array_equal(a, b)
