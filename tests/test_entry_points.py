"""Every command `pyproject.toml` declares resolves to a callable `main` and answers `--help` (no compile)."""
import importlib
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def test_the_main_commands_are_declared():
    assert {"nexus-train", "nexus-evaluate", "nexus-sweep", "nexus-pipeline", "nexus-report"} <= set(SCRIPTS)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_script_answers_help(name, capsys):
    module, _, attr = SCRIPTS[name].partition(":")
    main = getattr(importlib.import_module(module), attr)
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_train_has_at_most_seven_commands():
    """The library's commands are the declared ones; a study's script lives in experiments/."""
    mains = [p for p in (ROOT / "train").rglob("*.py") if "__main__" in p.read_text() or "entry_point(" in p.read_text()]
    assert len(mains) <= 7, sorted(str(p.relative_to(ROOT)) for p in mains)
    declared = {SCRIPTS[n].partition(":")[0] for n in SCRIPTS}
    for p in mains:
        mod = ".".join(p.relative_to(ROOT).with_suffix("").parts)
        assert mod in declared, f"{mod} is a command but not in [project.scripts]"
