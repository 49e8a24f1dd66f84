"""bench.profile runs at toy sizes and maps kernels to this package's source (the HLO stack-frame tables it
parses are XLA's text format: a change there should fail here, not mislead a profile)."""
import json

import pytest

from bench import profile


def test_profile_maps_kernels_to_source_lines(tmp_path):
    out = tmp_path / "profile.json"
    assert profile.main(["core", "--batch", "8", "--steps", "2", "--top", "40", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["ns_per_env_step"] > 0
    sources = " ".join(t["source"] for t in result["top"])
    assert "dynamics.py" in sources and any(phase in sources for phase in ("(expire)", "(settle)", "(commit)", "(shock)"))
    assert sum(result["by_file_ns"].values()) > 0.99 * result["ns_per_env_step"]


@pytest.mark.slow
def test_profile_of_the_ppo_update_names_the_networks_and_kernel_kinds(tmp_path):
    out = tmp_path / "update.json"
    assert profile.main(["update", "--batch", "4", "--steps", "8", "--top", "40", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert "networks.py" in result["by_file_ns"]
    kinds = result["by_kind_ns"]
    assert kinds["matrix product"] > 0
    assert abs(sum(kinds.values()) - result["ns_per_env_step"]) < 1e-6 * result["ns_per_env_step"]


def test_kernel_kind():
    assert profile.kernel_kind("ynn_fusion.12", "  %dot.1 = f32[8,4]{1,0} dot(%p0, %p1)") == "matrix product"
    assert profile.kernel_kind("ynn_fusion.12", "  %r = f32[8]{0} reduce(%p0, %c)") == "ynnpack reduction"
    assert profile.kernel_kind("dot.139") == "matrix product"
    assert profile.kernel_kind("gather_bitcast_fusion.10") == "gather"
    assert profile.kernel_kind("multiply_add_fusion.65") == "other XLA fusion"
