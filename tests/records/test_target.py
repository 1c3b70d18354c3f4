"""Target parsing into TVM's canonical config, and the documented match policy."""

from __future__ import annotations

import pytest

from msdb.records import Target, TargetError

TVM_CPU = {"keys": ["cpu"], "kind": "llvm", "mtriple": "x86_64-conda-linux-gnu", "num-cores": 1, "tag": ""}
TVM_GPU = {"arch": "sm_80", "keys": ["cuda", "gpu"], "kind": "cuda", "max_num_threads": 1024, "tag": "",
           "thread_warp_size": 32}


def test_tvm_dicts_are_kept_with_sorted_keys():
    assert Target(TVM_CPU).config == TVM_CPU
    assert Target(dict(reversed(list(TVM_GPU.items())))).canonical_json() == (
        '{"arch":"sm_80","keys":["cuda","gpu"],"kind":"cuda","max_num_threads":1024,"tag":"","thread_warp_size":32}')


@pytest.mark.parametrize("text, config", [
    ("cuda -arch=sm_80", TVM_GPU),
    ("llvm -mcpu=skylake-avx512 -num-cores=4",
     {"keys": ["cpu"], "kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 4, "tag": ""}),
    ("llvm -keys=cpu -mtriple=x86_64-conda-linux-gnu -num-cores=1", TVM_CPU),
    ("llvm -mattr=+avx2,+fma -libs=cblas -fast-math",
     {"fast-math": True, "keys": ["cpu"], "kind": "llvm", "libs": ["cblas"], "mattr": ["+avx2", "+fma"], "tag": ""}),
    ('{"kind": "llvm", "num-cores": 1, "mtriple": "x86_64-conda-linux-gnu"}', TVM_CPU),
])
def test_cli_strings_and_json_text_parse_like_tvms_dicts(text, config):
    assert Target(text).config == config
    assert Target(text) == Target(config)
    assert Target(str(Target(text))) == Target(text)  # the printed form parses back


@pytest.mark.parametrize("bad, message", [
    ("", "empty target string"),
    ("lvm -mcpu=skylake", "target 'lvm -mcpu=skylake': unknown target kind 'lvm'"),
    ("llvm mcpu=skylake", "target string 'llvm mcpu=skylake': option 'mcpu=skylake' is not of the form -key=value"),
    ("nvidia/geforce-rtx-3080", "target tags such as 'nvidia/geforce-rtx-3080' are not supported"),
    ('{"kind": ', "target string '{\"kind\": ' looks like JSON but does not parse"),
    ({"arch": "sm_80"}, "has no 'kind'"),
    # options TVM 0.27 types as integers refuse anything else, as TVM does
    ("llvm -num-cores=four=4", "target 'llvm -num-cores=four=4': option 'num-cores' must be an integer, got 'four=4'"),
    ({"kind": "llvm", "num-cores": True}, "option 'num-cores' must be an integer, got True"),
    ({"kind": "cuda", "max_num_threads": "1024"}, "option 'max_num_threads' must be an integer, got '1024'"),
    ({"kind": "llvm", "opt-level": 2.5}, "option 'opt-level' must be an integer, got 2.5"),
])
def test_bad_targets_name_the_input(bad, message):
    with pytest.raises(TargetError) as info:
        Target(bad)
    assert message in str(info.value)


SKYLAKE = Target("llvm -mcpu=skylake-avx512 -mtriple=x86_64-pc-linux-gnu -num-cores=4")


@pytest.mark.parametrize("record, matches", [
    ("llvm -mcpu=skylake-avx512 -mtriple=x86_64-unknown-linux-gnu -num-cores=16", True),  # vendor/OS, cores ignored
    ("llvm -mcpu=skylake-avx512 -tag=mine -keys=cpu,x86", True),  # tag and keys ignored
    ("llvm", True),  # a generic record states no CPU: any llvm CPU may use it
    ("llvm -mtriple=x86_64-conda-linux-gnu -num-cores=1", True),  # TVM's fixture target
    ("llvm -mcpu=znver3", False),
    ("llvm -mtriple=aarch64-linux-gnu", False),
    ("llvm -mcpu=skylake-avx512 -device=arm_cpu", True),  # the query states no device
    ("cuda -arch=sm_80", False),
    ("c", False),
    (None, False),
])
def test_default_match_policy(record, matches):
    assert SKYLAKE.matches(Target.coerce(record)) is matches


def test_gpu_arch_and_device_identity():
    a100 = Target("cuda -arch=sm_80")
    assert a100.matches(Target("cuda -arch=sm_80 -max_num_threads=512"))
    assert not a100.matches(Target("cuda -arch=sm_90"))
    assert not a100.matches(Target("rocm -mcpu=gfx90a"))
    arm = Target("llvm -device=arm_cpu -mtriple=aarch64-linux-gnu")
    assert not arm.matches(Target("llvm -device=mali -mtriple=aarch64-linux-gnu"))
    assert SKYLAKE.match_key == ("llvm", "skylake-avx512", "x86_64", "")


def test_strict_compares_every_attribute_but_tag_keys_and_triple_vendor():
    strict = SKYLAKE.with_strict()
    assert strict.strict and not SKYLAKE.strict
    assert strict.matches(Target("llvm -mcpu=skylake-avx512 -mtriple=x86_64-unknown-linux-gnu -num-cores=4 -tag=t"))
    assert not strict.matches(Target("llvm -mcpu=skylake-avx512 -mtriple=x86_64-pc-linux-gnu -num-cores=8"))
    assert not strict.matches(Target("llvm -mcpu=skylake-avx512 -num-cores=4"))  # mtriple stated on one side only
    assert strict == SKYLAKE  # strictness belongs to the query, not to the config


def test_host_target_describes_this_machine():
    import os

    host = Target.host()
    assert host.kind == "llvm"
    assert host.get("num-cores") == (os.cpu_count() or 1)
    assert host.get("mcpu") and host.get("mtriple")
    assert host.matches(Target({"kind": "llvm", "mcpu": host.get("mcpu")}))
