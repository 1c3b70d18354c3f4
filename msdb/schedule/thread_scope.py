"""Storage and thread ranks of GPU memory scopes, as TVM ranks them (docs/architecture.md,
"Schedules and traces").

A buffer in `shared` memory is one buffer for every thread of a thread block, so when a
primitive computes the region a consumer needs per iteration of a loop, the loops bound to
`threadIdx` and `vthread` above that loop must be relaxed too: the copy into shared memory has
to cover what all the block's threads read, not one thread's share. TVM's rule
(CanRelaxStorageUnderThread): storage ranks global 0, shared 1, warp 2, local 3; thread ranks
blockIdx 0, threadIdx and vthread 1. A storage of rank r is relaxed over a thread loop of rank
>= r (warp memory: over threadIdx.x only); global memory is never relaxed this way.
"""

from __future__ import annotations

__all__ = ["storage_rank", "thread_rank", "relaxes_under_thread", "GLOBAL_RANK"]

GLOBAL_RANK = 0
_SHARED_RANK, _WARP_RANK, _LOCAL_RANK = 1, 2, 3


def storage_rank(scope: str) -> int:
    """The rank of a storage scope ("" and "global" 0, "shared" / "shared.dyn" 1, "warp" 2,
    "local" 3; the tensor-core fragments "wmma.*" and "m16n8k8.*" rank below local, as TVM's
    enum orders them)."""
    base = scope.split(".")[0] if scope else "global"
    if base == "global":
        return GLOBAL_RANK
    if base == "shared":
        return _SHARED_RANK
    if base == "warp":
        return _WARP_RANK
    if base == "local":
        return _LOCAL_RANK
    return _LOCAL_RANK + 1  # wmma.* / m16n8k8.* / metal.simdgroup: thread-private fragments


def thread_rank(tag: str) -> int:
    """The rank of a thread tag: blockIdx.* 0; threadIdx.*, vthread* and cthread 1."""
    if tag.startswith("blockIdx."):
        return 0
    if tag.startswith("threadIdx.") or tag.startswith("vthread") or tag == "cthread":
        return 1
    raise ValueError(f"unknown thread tag {tag!r}")


def relaxes_under_thread(scope: str, tag: str) -> bool:
    """Whether a buffer of storage `scope` is shared by the iterations of a loop bound to
    `tag`, so that region analysis must relax that loop."""
    rank = storage_rank(scope)
    if rank == GLOBAL_RANK:
        return False
    if rank == _WARP_RANK:
        return tag == "threadIdx.x"
    return rank <= thread_rank(tag)
