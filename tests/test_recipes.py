"""The ecosystem guide's recipes (docs/recipes/*.diff, shown verbatim by docs/ecosystem.md) are the diffs
a user applies, and they work as written.

Quick tier, no upstream files needed (CI has none): each diff is well formed and applies to its upstream lines as
pinned by its own context (`recipes.synthetic_upstream`); `import nexus_jax` is added ahead of every import the
hunk shows; the upstream values it replaces are upstream's (`recipes.UPSTREAM_CONFIGS`); its make line, run on the
config it gives, makes the env. experiments/ecosystem/test_upstream_configs.py trains the study's port of each
script on that config (full tier). Full tier, where a copy of the upstream repository is on the machine
(`recipes.upstream_repo`; skipped otherwise): the diff applied to the real files with `git apply`, and the patched
script run as its README runs it, at toy sizes given the way the script takes settings (hydra's KEY=VALUE; PureJaxRL
has none, so its config's sizes are rewritten in the patched copy), with two seeds where the script vmaps over
seeds. hydra, omegaconf and wandb (JaxMARL's scripts) and brax and navix (imported by PureJaxRL's wrappers.py, for
other envs) are not dependencies of this project: small stand-ins (`STAND_INS`) load the yaml with the overrides and
drop the logging; the scripts' own code runs unchanged.
"""
import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import nexus_jax
import recipes

NAMES = recipes.names()


def test_there_is_a_recipe_per_upstream_script_the_guide_names():
    assert NAMES == ["jaxmarl-ippo_ff_mpe", "jaxmarl-ippo_rnn_smax", "jaxmarl-mappo_rnn_mpe", "purejaxrl-ppo"]
    guide = (recipes.ROOT / "docs" / "ecosystem.md").read_text()
    for name in NAMES:
        assert f"<!-- snippet: docs/recipes/{name}.diff -->" in guide, name


@pytest.mark.parametrize("name", NAMES)
def test_the_recipe_applies_to_the_upstream_lines_it_pins(name, tmp_path):
    recipe = recipes.read(name)
    assert recipe.repo in ("FLAIROx/JaxMARL", "luchris429/purejaxrl") and recipe.config_path in recipes.UPSTREAM_CONFIGS
    for path in recipe.files:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(recipes.synthetic_upstream(recipe, path))
    done = recipes.apply(recipe, tmp_path)
    assert done.returncode == 0, done.stderr
    _, added = recipes.changes(recipe, recipe.script)
    patched = (tmp_path / recipe.script).read_text().splitlines()
    assert all(line in patched for line in added)
    again = recipes.apply(recipe, tmp_path, check_only=True)  # applied once, it no longer applies: not a no-op
    assert again.returncode != 0


@pytest.mark.parametrize("name", NAMES)
def test_import_nexus_jax_is_added_before_every_import(name):
    """XLA reads its flags once, when JAX starts its backend (`import jaxmarl` starts it), so `import nexus_jax`
    must be the script's first import: the first hunk adds it, after nothing but the module docstring."""
    recipe = recipes.read(name)
    first = recipe.files[recipe.script][0]
    lines = list(first.lines)
    at = lines.index("+import nexus_jax  # the first import: its XLA:CPU flag applies only before JAX starts its "
                     "backend")
    assert first.old_start <= 5 and not any(ln[1:].startswith(("import ", "from ")) for ln in lines[:at])
    assert lines[at + 1][1:].startswith(("import ", "from "))  # upstream's first import follows it


@pytest.mark.parametrize("name", NAMES)
def test_the_recipe_replaces_upstream_values_and_makes_the_env(name):
    recipe = recipes.read(name)
    old, new = recipes.config_change(recipe)
    upstream = recipes.UPSTREAM_CONFIGS[recipe.config_path]
    assert old and {k: upstream[k] for k in old} == old  # the diff's upstream side is upstream's
    assert new["ENV_NAME"] in nexus_jax.registered_envs()
    config = recipes.config(recipe)
    made = recipes.run_make_line(recipe, config, {"nexus_jax": nexus_jax})
    env = made["env"]
    if "env_params" in made:  # PureJaxRL: the gymnax view, gymnax 0.0.x's 5-tuple step
        assert made["env_params"] is not None and env.gymnax_v1 is False
    else:
        assert len(env.agents) >= 1 and env.action_space(env.agents[0]).n >= 2
    assert env.action_format == config.get("ENV_KWARGS", {}).get("action_format", env.action_format)


# ---- the real upstream files, where a copy is on this machine ------------------------------------------------------

STAND_INS = {  # per upstream repository: what its scripts import that this project does not install
    "FLAIROx/JaxMARL": {
    "hydra/__init__.py": '''
"""Stand-in for hydra.main: the yaml beside the script, `KEY=VALUE` overrides, ${oc.env:NAME} read from os.environ."""
import functools, inspect, os, re, sys
from pathlib import Path
from tests.recipes import yaml_load  # OmegaConf's reading of YAML (2e-3 is a float)

def _resolve(v):
    if isinstance(v, str):
        return re.sub(r"\\$\\{oc\\.env:(\\w+)\\}", lambda m: os.environ.get(m.group(1), ""), v)
    return v

def main(version_base=None, config_path=None, config_name=None):
    def wrap(fn):
        @functools.wraps(fn)
        def run():
            path = Path(inspect.getfile(fn)).parent / config_path / f"{config_name}.yaml"
            cfg = {k: _resolve(v) for k, v in yaml_load(path.read_text()).items()}
            for arg in sys.argv[1:]:
                key, _, value = arg.partition("=")
                cfg[key] = yaml_load(value)
            return fn(cfg)
        return run
    return wrap
''',
    "omegaconf/__init__.py": '''
class OmegaConf:
    @staticmethod
    def to_container(cfg):
        return dict(cfg)
''',
    "wandb/__init__.py": '''
def init(**kwargs):
    pass

def log(*args, **kwargs):
    pass
''',
    },
    "luchris429/purejaxrl": {  # wrappers.py imports both for other envs; neither may be stubbed for jaxmarl, which
    "brax/__init__.py": "",    # probes brax and uses it when it imports
    "brax/envs/__init__.py": "",
    "brax/envs/wrappers/__init__.py": "",
    "brax/envs/wrappers/training.py": "class EpisodeWrapper:\n    pass\n\n\nclass AutoResetWrapper:\n    pass\n",
    "navix/__init__.py": "",
    },
}

# toy sizes; 2 actors per minibatch at least (the recurrent scripts squeeze a minibatch's hidden state, so one actor
# would lose its batch axis)
TOY = ["NUM_ENVS=4", "NUM_STEPS=4", "TOTAL_TIMESTEPS=32", "NUM_MINIBATCHES=2", "UPDATE_EPOCHS=1", "NUM_SEEDS=2"]
RUNS = {  # how each script is run (its README's command), with toy sizes
    "jaxmarl-ippo_ff_mpe": (["python", "baselines/IPPO/ippo_ff_mpe.py", *TOY], None),
    "jaxmarl-mappo_rnn_mpe": (["python", "baselines/MAPPO/mappo_rnn_mpe.py", *TOY, "GRU_HIDDEN_DIM=8",
                               "FC_DIM_SIZE=8"], None),
    # upstream's layer sizes kept: with NUM_SEEDS=2 its batched QRs are the ones that hang XLA:CPU's default scheduler
    # (unmodified, on SMAX, the same command was killed at 300 s), so this run shows the recipe's import order holds
    "jaxmarl-ippo_rnn_smax": (["python", "baselines/IPPO/ippo_rnn_smax.py", *TOY], None),
    # ppo.py takes no settings: its __main__ config's sizes are rewritten in the patched copy (2 updates, episodes
    # of 100 steps end inside them, so DEBUG prints returns)
    "purejaxrl-ppo": (["python", "ppo.py"], {'"TOTAL_TIMESTEPS": 5e5': '"TOTAL_TIMESTEPS": 1024'}),
}
EXTRA_FILES = {"purejaxrl-ppo": ["purejaxrl/wrappers.py"]}  # what the script imports from its own folder


@pytest.mark.slow  # compiles four upstream training programs
@pytest.mark.parametrize("name", NAMES)
def test_the_recipe_applied_to_the_upstream_script_runs_as_documented(name, tmp_path):
    recipe = recipes.read(name)
    repo = recipes.upstream_repo(recipe.repo)
    if repo is None:
        pytest.skip(f"no copy of {recipe.repo} on this machine (NEXUS_JAX_UPSTREAM)")
    pytest.importorskip("jaxmarl")  # the `jaxmarl` extra (JaxMARL's scripts; gymnax for PureJaxRL's)
    tree = tmp_path / "upstream"
    for path in [*recipe.files, *EXTRA_FILES.get(name, [])]:
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(recipes.upstream_file(repo, recipe.commit, path))
    done = recipes.apply(recipe, tree)
    assert done.returncode == 0, done.stderr  # the diff applies to the real file, exactly
    script = tree / recipe.script
    first = ast.parse(script.read_text()).body
    imports = [n for n in first if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert ast.unparse(imports[0]) == "import nexus_jax"
    argv, rewrite = RUNS[name]
    if rewrite:
        text = script.read_text()
        for old, new in rewrite.items():
            assert text.count(old) == 1
            text = text.replace(old, new)
        script.write_text(text)
    stand_ins = tmp_path / "stand_ins"
    for path, text in STAND_INS[recipe.repo].items():
        (stand_ins / path).parent.mkdir(parents=True, exist_ok=True)
        (stand_ins / path).write_text(text)
    cwd = script.parent if rewrite else tree
    env = {**{k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}, "JAX_PLATFORMS": "cpu",  # XLA's own flags
           "PYTHONPATH": f"{stand_ins}:{recipes.ROOT}"}
    out = subprocess.run([sys.executable, *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, (out.stdout[-2000:], out.stderr[-4000:])

