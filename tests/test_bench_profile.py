"""bench.profile runs at toy sizes and maps kernels to this package's source (the HLO stack-frame tables it
parses are XLA's text format: a change there should fail here, not mislead a profile)."""
import json

from bench import profile


def test_profile_maps_kernels_to_source_lines(tmp_path):
    out = tmp_path / "profile.json"
    assert profile.main(["core", "--batch", "8", "--steps", "2", "--top", "40", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["ns_per_env_step"] > 0
    sources = " ".join(t["source"] for t in result["top"])
    assert "dynamics.py" in sources and any(phase in sources for phase in ("(expire)", "(settle)", "(commit)", "(shock)"))
    assert sum(result["by_file_ns"].values()) > 0.99 * result["ns_per_env_step"]
