"""bench.fastpaths_ab runs end to end at toy sizes, and both forms give the same checksum (its exit code)."""
import pytest

from bench import fastpaths_ab


@pytest.mark.slow  # a benchmark's harness at toy sizes; the fast-path values are tests/test_fastpaths.py's
def test_fast_and_plain_rollouts_are_timed_and_agree(capsys):
    assert fastpaths_ab.main(["--batch", "4", "--steps", "2", "--rounds", "2", "--masks"]) == 0
    out = capsys.readouterr().out
    assert out.count("plain/fast time") == 2 and "N=4, 4 envs, masks: plain takes" in out
