"""pyproject.toml's lower bounds are the versions `bash tests/min_versions.sh` installs and tests
(tests/min-versions.txt): a bound raised or lowered without the pins moving with it fails here."""
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BOUND = re.compile(r"^([A-Za-z0-9_.\-]+)>=([0-9][0-9A-Za-z.]*)$")
NOT_RUN = {"playwright"}  # the dev extra's browser driver for the HTML replay test, which the min run does not run


def lower_bounds() -> dict[str, str]:
    """{package: version} of every `package>=version` in the core dependencies and the dev extra."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    out = {}
    for req in project["dependencies"] + project["optional-dependencies"]["dev"]:
        m = BOUND.match(req.split(";")[0].strip())
        assert m, f"pyproject.toml: {req!r} is not `package>=version` (the min-versions run pins lower bounds)"
        if m[1].lower() not in NOT_RUN:
            out[m[1].lower()] = m[2]
    return out


def pins() -> dict[str, str]:
    lines = (ROOT / "tests" / "min-versions.txt").read_text().splitlines()
    return {name.lower(): v for name, _, v in (ln.partition("==") for ln in lines if ln and not ln.startswith("#"))}


def test_every_lower_bound_is_pinned_in_the_min_versions_run():
    assert lower_bounds() == pins()


def test_requires_python_is_the_min_versions_python():
    """The script's default interpreter is requires-python's floor: the floor is a tested version too."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    floor = project["requires-python"].removeprefix(">=")
    assert f'PYTHON:-python{floor}' in (ROOT / "tests" / "min_versions.sh").read_text()

