"""The documentation site cannot drift from the code: generated tables cover every params field and
observation block, and every public name is in the API pages.

The tables are built by the site's mkdocs hook (docs/hooks/generated.py), loaded here as a module;
`mkdocs build --strict` (CI) renders them. These checks need no mkdocs.
"""
import ast
import dataclasses
import importlib.util
import re
import sys
from pathlib import Path

import jax
import pytest

from nexus_jax.base.fields import ORIGINS, param
from nexus_jax.envs import crisis, nexus
from nexus_jax.envs.crisis import core as crisis_core
from nexus_jax.envs.crisis import observation as crisis_observation
from nexus_jax.envs.crisis import param_fields as crisis_fields
from nexus_jax.envs.nexus import observation as nexus_observation
from nexus_jax.envs.nexus import param_fields as nexus_fields

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _load_hook():
    spec = importlib.util.spec_from_file_location("docs_hooks_generated", DOCS / "hooks" / "generated.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


gen = _load_hook()
PARAMS = [(nexus.NexusParams, nexus_fields.field_spec), (crisis.CrisisParams, crisis_fields.field_spec)]


# ---- params ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("cls, field_spec", PARAMS, ids=["nexus", "crisis"])
def test_every_params_field_has_a_doc_and_an_origin_and_a_table_row(cls, field_spec):
    fields = dataclasses.fields(cls)
    for f in fields:
        assert f.metadata.get("origin") in ORIGINS, f"{cls.__name__}.{f.name}: no origin"
        doc = f.metadata.get("doc", "")
        assert doc.strip() and "\n" not in doc, f"{cls.__name__}.{f.name}: no one-line doc"
    table = gen.params_table(cls, field_spec)
    rows = [line for line in table.splitlines()[2:]]
    assert [re.match(r"\| `(\w+)`", r).group(1) for r in rows] == [f.name for f in fields]
    assert "| `num_agents` (static) |" in table


@pytest.mark.parametrize("cls, field_spec", PARAMS, ids=["nexus", "crisis"])
def test_a_field_without_a_doc_fails_the_table(cls, field_spec):
    @dataclasses.dataclass
    class Undocumented:
        documented: float = param(1.0, "ours", "a field with its meaning")
        bare: float = 2.0

    with pytest.raises(ValueError, match="Undocumented.bare has no doc or origin"):
        gen.params_rows(Undocumented, lambda name: field_spec("max_steps"))


def test_param_keeps_static_fields_out_of_the_pytree():
    """`param(..., static=True)` is flax's `pytree_node=False`: shapes stay in the treedef, the rest are leaves."""
    for cls, _ in PARAMS:
        fields = dataclasses.fields(cls)
        static = [f.name for f in fields if not f.metadata["pytree_node"]]
        leaves = jax.tree.leaves(cls.create())
        assert len(leaves) == len(fields) - len(static)
        assert "num_agents" in static and "max_steps" not in static


def test_param_rejects_an_unknown_origin_or_a_multiline_doc():
    with pytest.raises(ValueError, match="origin"):
        param(1.0, "mine", "a number")
    with pytest.raises(ValueError, match="one non-empty line"):
        param(1.0, "ours", "two\nlines")


def test_accepts_reads_the_field_spec():
    assert gen.accepts(nexus_fields.field_spec("p_solar_flare")) == "real in [0, 1]"
    assert gen.accepts(nexus_fields.field_spec("num_agents")) == "integer in [2, 64]"
    assert gen.accepts(nexus_fields.field_spec("npc_noise")) == "real (A,) ≥ 0"
    assert gen.accepts(nexus_fields.field_spec("obs_scale")) == "real > 0"
    assert gen.accepts(crisis_fields.field_spec("task_deps")) == "bool (T, T)"


# ---- observation -----------------------------------------------------------------------------------

@pytest.mark.parametrize("overrides", [{}, {"num_agents": 2, "obs_ledger_events": 3}, {"num_agents": 5}])
def test_every_nexus_observation_block_is_described_and_sized_as_documented(overrides):
    p = nexus.NexusParams.create(**overrides)
    layout = nexus.observation_layout(p)
    rows = gen.observation_rows(layout, nexus_observation.BLOCK_DOCS, gen.nexus_dims(p))
    assert [r.name for r in rows] == list(layout)
    assert rows[-1].stop == jax.eval_shape(lambda k: nexus.reset(k, p)[0], jax.random.PRNGKey(0)).shape[1]


@pytest.mark.parametrize("overrides", [{}, {"num_agents": 4, "max_tasks": 5, "dependency_features": True}])
def test_every_crisis_observation_block_is_described_and_sized_as_documented(overrides):
    p = crisis.CrisisParams.create(**overrides)
    layout = crisis.observation_layout(p)
    rows = gen.observation_rows(layout, crisis_observation.BLOCK_DOCS, gen.crisis_dims(p))
    assert [r.name for r in rows] == list(layout)
    assert rows[-1].stop == jax.eval_shape(lambda k: crisis_core.reset(k, p)[0], jax.random.PRNGKey(0)).shape[1]


def test_an_undescribed_or_missized_block_fails_the_table():
    p = nexus.NexusParams.create()
    layout = nexus.observation_layout(p)
    docs = dict(nexus_observation.BLOCK_DOCS)
    del docs["ledger"]
    with pytest.raises(ValueError, match="without a description: \\['ledger'\\]"):
        gen.observation_rows(layout, docs, gen.nexus_dims(p))
    docs = {**nexus_observation.BLOCK_DOCS, "ledger": ("16*K", "wrong size")}
    with pytest.raises(ValueError, match="'ledger': documented size 16\\*K"):
        gen.observation_rows(layout, docs, gen.nexus_dims(p))


# ---- pages -----------------------------------------------------------------------------------------

def _pages():
    return {p: p.read_text() for p in DOCS.rglob("*.md") if "reports" not in p.relative_to(DOCS).parts}


def test_every_marker_in_the_pages_resolves():
    markers = [(p, m.group(1), m.group(2)) for p, text in _pages().items() for m in gen.MARKER.finditer(text)]
    generated = {name for _, kind, name in markers if kind == "generated"}
    assert {"nexus-params", "crisis-params", "nexus-observation", "crisis-observation"} <= generated
    for name in generated:
        assert gen._generated(name).count("\n") >= 3, name
    for _, kind, target in markers:
        if kind == "snippet":
            assert gen.snippet(target).count("\n") >= 3, target  # raises when the file is gone
        if kind == "include":
            path, _, heading = target.partition("#")
            gen.section((ROOT / path).read_text(), heading.replace("-", " "))  # raises when it is gone
    with pytest.raises(ValueError, match="unknown generated table"):
        gen._generated("nexus-paramz")
    with pytest.raises(ValueError, match="no such file"):
        gen.snippet("docs/recipes/nothing.diff")


# The modules whose public names the API reference must cover: `__all__` where the module has one, else
# every top-level name it defines without a leading underscore.
API_MODULES = ["nexus_jax", "nexus_jax.envs.nexus", "nexus_jax.envs.crisis", "nexus_jax.wrappers", "nexus_jax.base",
               "nexus_jax.adapters.pettingzoo", "nexus_jax.adapters.gymnasium", "nexus_jax.adapters.openenv",
               "nexus_jax.protocol", "nexus_jax.rollout", "nexus_jax.sharding", "nexus_jax.viz",
               "train.ppo", "train.grpo", "train.bc", "train.qlearning", "train.config", "train.evaluate",
               "train.networks", "train.memory", "train.learner_env", "train.checkpoint", "train.sweep"]


def _module_file(module: str) -> Path:
    base = ROOT / Path(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def public_names(module: str) -> tuple[list[str], bool]:
    """(names, from `__all__`), read from the source without importing it (the adapters need their extras)."""
    tree = ast.parse(_module_file(module).read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value)), True
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return [n for n in names if not n.startswith("_")], False


DIRECTIVE = re.compile(r"^::: ([\w.]+)\n((?:    .*\n)*)", re.M)


def api_pages() -> list[str]:
    return [page.read_text() + "\n" for page in sorted((DOCS / "api").glob("*.md"))]


def api_coverage(pages: list[str]) -> dict[str, set[str]]:
    """module -> names the API pages render: `::: module.Name`, `::: module` with a `members:` list, or a bare
    `::: module` (every public name of it)."""
    covered: dict[str, set[str]] = {}
    for text in pages:
        for m in DIRECTIVE.finditer(text):
            target, options = m.group(1), m.group(2)
            members = re.search(r"members: (\[.*\]|false)", options)
            if target in API_MODULES:
                if members is None:
                    covered.setdefault(target, set()).update(public_names(target)[0])
                elif members.group(1) != "false":
                    covered.setdefault(target, set()).update(n.strip() for n in members.group(1)[1:-1].split(","))
            module, _, name = target.rpartition(".")
            if module in API_MODULES:
                covered.setdefault(module, set()).add(name)
    return covered


@pytest.mark.parametrize("module", API_MODULES)
def test_every_public_name_is_in_the_api_pages(module):
    names, _ = public_names(module)
    assert names, module
    missing = sorted(set(names) - api_coverage(api_pages()).get(module, set()))
    assert not missing, f"{module}: not in docs/api/*.md: {missing}"


def test_the_api_check_sees_a_missing_name():
    """The coverage reader is not vacuous: a name dropped from a page, or from a members list, is missing."""
    pages = api_pages()
    without = [t.replace("::: nexus_jax.envs.nexus.reset\n", "") for t in pages]
    assert "reset" in api_coverage(pages)["nexus_jax.envs.nexus"]
    assert "reset" not in api_coverage(without)["nexus_jax.envs.nexus"]
    listed = "::: nexus_jax.wrappers\n    options:\n      members: [LogWrapper, VecEnv]\n"
    assert api_coverage([listed])["nexus_jax.wrappers"] == {"LogWrapper", "VecEnv"}
    assert api_coverage(["::: nexus_jax.rollout\n"])["nexus_jax.rollout"] == set(public_names("nexus_jax.rollout")[0])
