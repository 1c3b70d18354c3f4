"""Where a compiled model's intermediate tensors live (docs/architecture.md, "Compile"): a value's
memory is handed to a later value once its last reader has run, as onnxruntime's and TVM's
memory planners do.

Why: with a buffer of its own for every intermediate, a CNN's activations add up to tens of
megabytes, so each function writes its output into memory no recent function touched, which
comes from DRAM (and is read before it is written over). Reused memory was written a few
functions ago and is still in cache: MobileNetV2's first expansion conv writes 4.8 MB.

An output the function computes element by element from an input it reads for the last time
(a residual add: `in_place.in_place_inputs`) takes that input's memory, as onnxruntime's conv
with a `Sum` input does: 1-2% on ResNet-50 and BERT, nothing measurable on MobileNetV2 and
GPT-2 (docs/benchmarks.md, stop 34: both build orders; stop 33's larger figures had the in-place
build compiled first, which alone is worth up to 8%).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from msdb.tuner.compile.in_place import in_place_inputs

if TYPE_CHECKING:
    from msdb.model.graph import Model

__all__ = ["intermediate_buffers"]


def intermediate_buffers(model: Model) -> dict[str, np.ndarray]:
    """An array for every value the calls write, the graph's outputs included: a value that is
    not an output shares memory with values whose last reader ran before it was written (the
    smallest free block that holds it, else a new one). A call's outputs never share memory
    with its inputs, nor with each other, except an output written in place of an input
    (`in_place_inputs`)."""
    last_read: dict[str, int] = {}
    for index, call in enumerate(model.calls):
        for name in call.args:
            last_read[name] = index
    kept = set(model.outputs)
    free: list[np.ndarray] = []  # 1-d uint8 blocks no live value uses
    block_of: dict[str, np.ndarray] = {}
    buffers: dict[str, np.ndarray] = {}
    in_place: dict[str, dict[int, int]] = {}  # function -> {output position: input position}
    for index, call in enumerate(model.calls):
        if call.function not in in_place:
            in_place[call.function] = in_place_inputs(model.functions[call.function], len(call.args))
        for position, name in enumerate(call.outputs, len(call.args)):
            info = model.values[name]
            dtype = np.dtype("bool") if info.dtype == "bool" else np.dtype(info.dtype)
            if name in kept:
                buffers[name] = np.zeros(info.shape, dtype=dtype)
                continue
            given = in_place[call.function].get(position)
            source = call.args[given] if given is not None else None
            if source in block_of and last_read[source] == index and call.args.count(source) == 1:
                block_of[name] = block_of.pop(source)
                buffers[name] = buffers[source]
                continue
            size = max(1, math.prod(info.shape) * dtype.itemsize)
            fits = [i for i, block in enumerate(free) if block.nbytes >= size]
            block = free.pop(min(fits, key=lambda i: free[i].nbytes)) if fits else np.zeros(size, dtype=np.uint8)
            block_of[name] = block
            buffers[name] = block[:math.prod(info.shape) * dtype.itemsize].view(dtype).reshape(info.shape)
        # after the outputs are placed: what this call read for the last time (or wrote for
        # nobody) is free for the next calls
        for name in (*call.args, *call.outputs):
            if name in block_of and last_read.get(name, index) <= index:
                free.append(block_of.pop(name))
    return buffers
