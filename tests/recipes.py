"""The ecosystem guide's recipes as data: docs/recipes/*.diff, the exact diffs a user applies to upstream scripts.

docs/ecosystem.md (the guide) shows each file verbatim (`<!-- snippet: ... -->`), and the tests read the same
file: tests/test_recipes.py checks each diff is well formed and applies, that its upstream side agrees with the
upstream configs transcribed below, and runs its make line; experiments/ecosystem/test_upstream_configs.py runs
the study's port of each script (its data path, our code) on the config the recipe gives; where a copy of the
upstream repository is at hand (`upstream_repo`), tests/test_recipes.py applies the diff to the real files and
runs the scripts as documented. CI has no upstream files, so the recipe's upstream side is pinned here by
`UPSTREAM_CONFIGS` and by the recipe's own context lines.
"""
from __future__ import annotations

import ast
import os
import re
import subprocess
import textwrap
from pathlib import Path
from typing import NamedTuple, Optional

import yaml

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "docs" / "recipes"
HEADER = re.compile(r"^# Upstream (\S+) at commit ([0-9a-f]{7,40}); in a checkout of it: git apply (\S+)$", re.M)
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
CONFIG_ITEM = re.compile(r'^\s*"[A-Z_]+":')  # a key of an upstream config dict ("ENV_NAME": ...)

# The upstream configs each recipe changes, transcribed (every key but the wandb ones), at the commits the
# recipes name: JaxMARL's yaml files and PureJaxRL ppo.py's `config` under `__main__`.
UPSTREAM_CONFIGS = {
    "baselines/IPPO/config/ippo_ff_mpe.yaml": {
        "LR": 2.5e-4, "NUM_ENVS": 16, "NUM_STEPS": 128, "TOTAL_TIMESTEPS": 1e7, "UPDATE_EPOCHS": 4,
        "NUM_MINIBATCHES": 4, "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "ENT_COEF": 0.01, "VF_COEF": 0.5,
        "MAX_GRAD_NORM": 0.5, "ACTIVATION": "tanh", "ENV_NAME": "MPE_simple_spread_v3", "ENV_KWARGS": {},
        "ANNEAL_LR": True, "SEED": 30, "NUM_SEEDS": 10},
    "baselines/MAPPO/config/mappo_homogenous_rnn_mpe.yaml": {
        "LR": 2e-3, "NUM_ENVS": 16, "NUM_STEPS": 128, "TOTAL_TIMESTEPS": 1e7, "FC_DIM_SIZE": 128,
        "GRU_HIDDEN_DIM": 128, "UPDATE_EPOCHS": 4, "NUM_MINIBATCHES": 4, "GAMMA": 0.99, "GAE_LAMBDA": 0.95,
        "CLIP_EPS": 0.2, "SCALE_CLIP_EPS": False, "ENT_COEF": 0.01, "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.5,
        "ACTIVATION": "tanh", "ENV_NAME": "MPE_simple_spread_v3", "SEED": 1, "NUM_SEEDS": 2, "ENV_KWARGS": {},
        "ANNEAL_LR": True},
    "baselines/IPPO/config/ippo_rnn_smax.yaml": {
        "LR": 0.004, "NUM_ENVS": 128, "NUM_STEPS": 128, "GRU_HIDDEN_DIM": 128, "FC_DIM_SIZE": 128,
        "TOTAL_TIMESTEPS": 1e7, "UPDATE_EPOCHS": 4, "NUM_MINIBATCHES": 4, "GAMMA": 0.99, "GAE_LAMBDA": 0.95,
        "CLIP_EPS": 0.05, "SCALE_CLIP_EPS": False, "ENT_COEF": 0.01, "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.25,
        "ACTIVATION": "relu", "ENV_NAME": "HeuristicEnemySMAX", "MAP_NAME": "2s3z", "SEED": 0, "NUM_SEEDS": 1,
        "ENV_KWARGS": {"see_enemy_actions": True, "walls_cause_death": True, "attack_mode": "closest"},
        "ANNEAL_LR": True},
    "purejaxrl/ppo.py": {
        "LR": 2.5e-4, "NUM_ENVS": 4, "NUM_STEPS": 128, "TOTAL_TIMESTEPS": 5e5, "UPDATE_EPOCHS": 4,
        "NUM_MINIBATCHES": 4, "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "ENT_COEF": 0.01, "VF_COEF": 0.5,
        "MAX_GRAD_NORM": 0.5, "ACTIVATION": "tanh", "ENV_NAME": "CartPole-v1", "ANNEAL_LR": True, "DEBUG": True},
}


class _OmegaConfLoader(yaml.SafeLoader):
    """YAML as hydra's OmegaConf reads it: `2e-3` is a float (YAML 1.1, and so PyYAML, reads it as a string)."""


_OmegaConfLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?|[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
                 |\.[0-9_]+(?:[eE][-+][0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))


def yaml_load(text: str):
    """Parse an upstream config the way its scripts' hydra does (floats with an exponent and no dot included)."""
    return yaml.load(text, Loader=_OmegaConfLoader)


class Hunk(NamedTuple):
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    lines: list  # the hunk's lines, each with its ' ', '-' or '+' mark

    def side(self, marks: str) -> list[str]:
        return [ln[1:] for ln in self.lines if ln[:1] in marks]


class Recipe(NamedTuple):
    name: str  # the file's stem, e.g. "jaxmarl-ippo_rnn_smax"
    repo: str  # owner/name upstream
    commit: str
    files: dict  # upstream path -> [Hunk]
    text: str

    @property
    def script(self) -> str:
        """The upstream script the recipe changes (its one .py file)."""
        (path,) = [p for p in self.files if p.endswith(".py")]
        return path

    @property
    def config_path(self) -> str:
        """Where the script's config lives: its yaml file, or the script itself (PureJaxRL)."""
        yamls = [p for p in self.files if p.endswith(".yaml")]
        return yamls[0] if yamls else self.script


def names() -> list[str]:
    return sorted(p.stem for p in RECIPES.glob("*.diff"))


def read(name: str) -> Recipe:
    """Parse docs/recipes/NAME.diff (git's unified format, after a header naming the upstream commit)."""
    text = (RECIPES / f"{name}.diff").read_text()
    header = HEADER.search(text)
    if header is None or header.group(3) != f"{name}.diff":
        raise ValueError(f"{name}.diff: no '# Upstream OWNER/NAME at commit SHA; in a checkout of it: git apply "
                         f"{name}.diff' line")
    files, path, hunk = {}, None, None
    for line in text.splitlines():
        if line.startswith("diff --git "):
            path, hunk = None, None
        elif line.startswith("+++ b/"):
            path = line[len("+++ b/"):]
            files[path] = []
        elif (m := HUNK.match(line)) and path is not None:
            old_start, old_len, new_start, new_len = (int(g) if g is not None else 1 for g in m.groups())
            hunk = Hunk(old_start, old_len, new_start, new_len, [])
            files[path].append(hunk)
        elif hunk is not None and line[:1] in " -+":
            hunk.lines.append(line)
    for path, hunks in files.items():
        for h in hunks:
            if len(h.side(" -")) != h.old_len or len(h.side(" +")) != h.new_len:
                raise ValueError(f"{name}.diff: a hunk of {path} at -{h.old_start} does not count its lines")
    return Recipe(name, header.group(1), header.group(2), files, text)


def changes(recipe: Recipe, path: str) -> tuple[list[str], list[str]]:
    """(removed, added) lines of `path`, every hunk together."""
    hunks = recipe.files[path]
    return [ln for h in hunks for ln in h.side("-")], [ln for h in hunks for ln in h.side("+")]


def _as_config(lines: list[str], path: str) -> dict:
    if path.endswith(".yaml"):
        return yaml_load("\n".join(lines)) or {}
    items = [ln.strip().rstrip(",") for ln in lines if CONFIG_ITEM.match(ln)]
    return ast.literal_eval("{" + ", ".join(items) + "}")


def config_change(recipe: Recipe) -> tuple[dict, dict]:
    """(the upstream values the recipe replaces, the values it writes) of the script's config."""
    removed, added = changes(recipe, recipe.config_path)
    return _as_config(removed, recipe.config_path), _as_config(added, recipe.config_path)


def config(recipe: Recipe) -> dict:
    """The script's config after the recipe: the transcribed upstream config with the recipe's values."""
    return {**UPSTREAM_CONFIGS[recipe.config_path], **config_change(recipe)[1]}


def make_statement(recipe: Recipe) -> str:
    """The line of the script the recipe makes the env with (dedented)."""
    (line,) = [ln for ln in changes(recipe, recipe.script)[1] if "nexus_jax.make" in ln]
    return textwrap.dedent(line)


def run_make_line(recipe: Recipe, config_: dict, namespace: dict) -> dict:
    """Execute the recipe's make line with `config` (and `namespace`: nexus_jax) -> the names it binds."""
    ns = {**namespace, "config": config_}
    exec(make_statement(recipe), ns)  # noqa: S102 (the repository's own recipe file)
    return {k: v for k, v in ns.items() if k not in namespace and k not in ("config", "__builtins__")}


def synthetic_upstream(recipe: Recipe, path: str) -> str:
    """A file with the recipe's upstream lines of `path` at the lines its hunks name and filler elsewhere: what
    the diff is checked to apply to where the real file is not at hand."""
    hunks = recipe.files[path]
    end = max(h.old_start + h.old_len for h in hunks)
    lines = [f"# upstream line {i}" for i in range(1, end + 3)]
    for h in hunks:
        for i, ln in enumerate(h.side(" -")):
            lines[h.old_start - 1 + i] = ln
    return "\n".join(lines) + "\n"


def apply(recipe: Recipe, tree: Path, check_only: bool = False) -> subprocess.CompletedProcess:
    """`git apply` the recipe in `tree`, as a user does in their checkout."""
    args = ["git", "apply", "--check"] if check_only else ["git", "apply"]
    return subprocess.run([*args, str(RECIPES / f"{recipe.name}.diff")], cwd=tree, capture_output=True, text=True)


def upstream_repo(repo: str) -> Optional[Path]:
    """A git copy of `repo` (owner/name) on this machine, or None: `$NEXUS_JAX_UPSTREAM/<owner>+<name>/repo`
    (default /work/.mirror, where this project's machines keep them) or `$NEXUS_JAX_UPSTREAM/<name>`."""
    root = Path(os.environ.get("NEXUS_JAX_UPSTREAM", "/work/.mirror"))
    owner, name = repo.split("/")
    for candidate in (root / f"{owner}+{name}" / "repo", root / name):
        if candidate.exists():
            return candidate
    return None


def upstream_file(repo_dir: Path, commit: str, path: str) -> str:
    return subprocess.run(["git", "-C", str(repo_dir), "show", f"{commit}:{path}"], capture_output=True, text=True,
                          check=True).stdout
