"""mkdocs hook: the tables that must not drift from the code, generated at build time.

A page asks for a table with a marker on a line of its own:

- `<!-- generated: nexus-params -->`, `crisis-params`: every params field with its default, what it
  accepts (`param_fields.field_spec`), its origin and its one-line meaning (the field's metadata,
  `nexus_jax.base.fields.param`);
- `nexus-observation`, `crisis-observation`: every observation block with its offsets in the
  default env, its size in general and its meaning (`observation_layout` and `BLOCK_DOCS`);
- `nexus-variants`, `crisis-variants`: every registered id of the env, its learner seats, spaces and
  the params it changes (each id is made and its params compared with the defaults);
- `nexus-actions`: the action spaces of each `action_format`.

`<!-- snippet: PATH -->` shows a file of the repository verbatim as a code block (the language from
its suffix), so a page shows the very file its tests read (the ecosystem guide's recipe diffs).

`<!-- include: PATH#HEADING -->` copies the section of a markdown file outside docs/ (a study's
README) from the heading that starts with HEADING (hyphens for spaces) to the next heading, so
the results page shows the study's current table rather than a copy of it; a file's title
becomes a section of the page, any other section nests under the heading before it. An
unknown marker or a missing section fails the build.
"""
from __future__ import annotations

import dataclasses
import posixpath
import re
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the hook runs from a checkout; `pip install -e .` is not required
    sys.path.insert(0, str(ROOT))

import nexus_jax  # noqa: E402
from nexus_jax import registry  # noqa: E402
from nexus_jax.base.fields import ORIGINS, Field  # noqa: E402
from nexus_jax.envs import crisis, nexus  # noqa: E402
from nexus_jax.envs.crisis import observation as crisis_observation  # noqa: E402
from nexus_jax.envs.crisis import param_fields as crisis_fields  # noqa: E402
from nexus_jax.envs.nexus import observation as nexus_observation  # noqa: E402
from nexus_jax.envs.nexus import param_fields as nexus_fields  # noqa: E402
from nexus_jax.envs.nexus.constants import Archetype  # noqa: E402

MARKER = re.compile(r"^<!-- (generated|include|snippet): (\S+) -->$", re.M)
SNIPPET_LANGUAGES = {".diff": "diff", ".py": "python", ".yaml": "yaml", ".sh": "bash"}
_KIND = {"float": "real", "int": "integer", "bool": "bool"}
_SEAT_TABLES = ("archetypes", "behaviours")  # (N,) archetype ids: shown by name


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _num(x) -> str:
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    return f"{x:g}" if isinstance(x, (float, np.floating)) else str(x)


def show_value(value) -> str:
    """A default or override, compactly: numbers with %g, nested tuples as tuples."""
    if value is None:
        return "None"
    arr = np.asarray(value)
    if arr.ndim == 0:
        return _num(arr.item())
    return "(" + ", ".join(show_value(v) for v in arr) + ("," if arr.shape[0] == 1 else "") + ")"


def accepts(spec: Field) -> str:
    """What a field accepts, e.g. 'real (A,) in [0, 1]', 'integer >= 1'."""
    shape = "" if spec.shape == () else " (" + ", ".join(str(d) for d in spec.shape) + ("," if len(spec.shape) == 1 else "") + ")"
    rng = ""
    if spec.lo is not None and spec.hi is not None:
        rng = f" in {'(' if spec.lo_open else '['}{_num(spec.lo)}, {_num(spec.hi)}]"
    elif spec.lo is not None:
        rng = f" {'>' if spec.lo_open else '≥'} {_num(spec.lo)}"
    elif spec.hi is not None:
        rng = f" ≤ {_num(spec.hi)}"
    return f"{_KIND[spec.kind]}{shape}{rng}"


class ParamRow(NamedTuple):
    name: str
    static: bool
    default: str
    accepts: str
    origin: str
    doc: str


def params_rows(cls, field_spec) -> list[ParamRow]:
    """One row per field of a params dataclass; raises naming a field without its doc or origin."""
    rows = []
    for f in dataclasses.fields(cls):
        doc, origin = f.metadata.get("doc"), f.metadata.get("origin")
        if not doc or origin not in ORIGINS:
            raise ValueError(f"{cls.__name__}.{f.name} has no doc or origin: declare it with "
                             f"nexus_jax.base.fields.param(default, origin, doc)")
        rows.append(ParamRow(f.name, not f.metadata.get("pytree_node", True), show_value(f.default),
                             accepts(field_spec(f.name)), origin, doc))
    return rows


def params_table(cls, field_spec) -> str:
    lines = ["| field | default | accepts | origin | meaning |", "|---|---|---|---|---|"]
    for r in params_rows(cls, field_spec):
        name = f"`{r.name}`" + (" (static)" if r.static else "")
        lines.append(f"| {name} | `{_cell(r.default)}` | {_cell(r.accepts)} | {r.origin} | {_cell(r.doc)} |")
    return "\n".join(lines)


def block_size(expr: str, dims: dict[str, int]) -> int:
    """The size of a block from its documented expression (e.g. '5*N', '19*(A-1)')."""
    if not re.fullmatch(r"[0-9A-Z*+\-() ]+", expr):
        raise ValueError(f"a block size must be arithmetic over dimension letters, got {expr!r}")
    return int(eval(expr, {"__builtins__": {}}, dims))  # noqa: S307 (digits, letters and + - * only)


class BlockRow(NamedTuple):
    name: str
    start: int
    stop: int
    size_expr: str
    doc: str


def observation_rows(layout: dict[str, slice], block_docs: dict[str, tuple[str, str]],
                     dims: dict[str, int]) -> list[BlockRow]:
    """One row per block, in layout order; raises naming a block without a description or whose documented
    size differs from the layout's."""
    missing = [n for n in layout if n not in block_docs]
    extra = [n for n in block_docs if n not in layout]
    if missing or extra:
        raise ValueError(f"observation blocks without a description: {missing}; described but absent: {extra}")
    rows = []
    for name, sl in layout.items():
        expr, doc = block_docs[name]
        if block_size(expr, dims) != sl.stop - sl.start:
            raise ValueError(f"observation block {name!r}: documented size {expr} = {block_size(expr, dims)} "
                             f"at {dims}, layout has {sl.stop - sl.start}")
        rows.append(BlockRow(name, sl.start, sl.stop, expr, doc))
    return rows


def observation_table(layout, block_docs, dims) -> str:
    rows = observation_rows(layout, block_docs, dims)
    lines = ["| block | offsets | size | size in general | what it holds |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| `{r.name}` | {r.start}:{r.stop} | {r.stop - r.start} | {r.size_expr.replace('*', ' × ')} "
                     f"| {_cell(r.doc)} |")
    lines.append(f"| **total** | 0:{rows[-1].stop} | {rows[-1].stop} | | |")
    return "\n".join(lines)


def nexus_dims(params) -> dict[str, int]:
    return {"N": params.num_agents, "K": params.obs_ledger_events}


def crisis_dims(params) -> dict[str, int]:
    return {"A": params.num_agents, "K": params.max_tasks,
            "F": crisis_observation.task_features(params.dependency_features)}


def _diff(params, base, names) -> list[str]:
    out = []
    for name in names:
        new, old = getattr(params, name), getattr(base, name)
        if np.shape(new) == np.shape(old) and np.array_equal(np.asarray(new), np.asarray(old)):
            continue
        if name in _SEAT_TABLES:
            shown = "(" + ", ".join(Archetype(int(a)).name for a in np.asarray(new)) + ")"
        else:
            shown = show_value(new)
        out.append(f"`{name}={shown}`")
    return out


_PER_SEAT = ("archetypes", "behaviours", "behaviour_shuffle")  # sized by N: not carried to another N


def _version_rules(env_id: str, prefix: str, statics: list) -> tuple[str, dict]:
    """(the id of `env_id`'s version base, e.g. nexus-v1, and the traced overrides that base registers)."""
    version = env_id.rsplit("-", 1)[-1]
    base = f"{prefix}{version}"
    if not re.fullmatch(r"v\d+", version) or base not in nexus_jax.registered_envs():
        return "", {}
    overrides = registry.variant(base)[1]
    return base, {k: v for k, v in overrides.items() if k not in statics and k not in _PER_SEAT and k != "learner_seats"}


def variants_table(prefix: str, cls) -> str:
    """Every registered id starting with `prefix`: learner seats, spaces, and the params it changes from its
    version's base id (`nexus-v1`'s variants from nexus-v1; traced fields against the base at the same static
    shape)."""
    statics = [f.name for f in dataclasses.fields(cls) if not f.metadata.get("pytree_node", True)]
    traced = [f.name for f in dataclasses.fields(cls) if f.metadata.get("pytree_node", True)]
    default = cls.create()
    lines = ["| id | learner seats | observation | actions | params changed from its version's base |",
             "|---|---|---|---|---|"]
    for env_id in nexus_jax.registered_envs():
        if not env_id.startswith(prefix):
            continue
        env = nexus_jax.make(env_id)
        p = env.default_params
        base, rules = _version_rules(env_id, prefix, statics)
        same_shape = cls.create(**{n: getattr(p, n) for n in statics}, **({} if base == env_id else rules))
        changed = _diff(p, default, statics) + _diff(p, same_shape, traced)
        if base == env_id and rules:
            changed = [f"the {env_id} rules (Version history)"]
        agent = env.agents[0]
        seats = ", ".join(env.agents) if len(env.agents) <= 4 else f"all {len(env.agents)}"
        lines.append(f"| `{env_id}` | {seats} | {env.observation_space(agent).shape} "
                     f"| {_cell(repr(env.action_space(agent)))} | {', '.join(changed) or '—'} |")
    return "\n".join(lines)


def nexus_actions_table() -> str:
    lines = ["| `action_format` | one agent's action | space (nexus-v0: N = 4, L = 7) |", "|---|---|---|"]
    what = {"flat": "an index of the flat enumeration of every structured action (masked by `get_avail_actions`)",
            "compact": "an index of a small subset of flat actions, for learners without masks",
            "structured": "a (5,) row (type, target, amount_1, amount_2, resource); the space is factored"}
    for fmt in nexus.NexusEnv.ACTION_FORMATS:
        env = nexus_jax.make("nexus-v0", action_format=fmt)
        lines.append(f"| `{fmt}` | {what[fmt]} | `{_cell(repr(env.action_space(env.agents[0])))}` |")
    return "\n".join(lines)


def _generated(name: str) -> str:
    if name == "nexus-params":
        return params_table(nexus.NexusParams, nexus_fields.field_spec)
    if name == "crisis-params":
        return params_table(crisis.CrisisParams, crisis_fields.field_spec)
    if name == "nexus-observation":
        p = nexus.NexusParams.create()
        return observation_table(nexus.observation_layout(p), nexus_observation.BLOCK_DOCS, nexus_dims(p))
    if name == "crisis-observation":
        p = crisis.CrisisParams.create()
        return observation_table(crisis.observation_layout(p), crisis_observation.BLOCK_DOCS, crisis_dims(p))
    if name == "nexus-variants":
        return variants_table("nexus-", nexus.NexusParams)
    if name == "crisis-variants":
        return variants_table("crisis-", crisis.CrisisParams)
    if name == "nexus-actions":
        return nexus_actions_table()
    raise ValueError(f"unknown generated table {name!r}")


HEADING = re.compile(r"^(#{1,6}) (.*)$")
HEADINGS = re.compile(r"^(#{1,6}) (.*)$", re.M)
LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)#\s]+)(#[^)\s]*)?\)")


def section(text: str, heading: str) -> tuple[int, list[str]]:
    """(level, lines) of the section whose heading text starts with `heading`, up to the next heading (lines in
    code blocks are not headings)."""
    lines, out, level, fence = text.splitlines(), None, 0, False
    for line in lines:
        if line.startswith("```"):
            fence = not fence
        m = None if fence else HEADING.match(line)
        if out is None:
            if m and m.group(2).startswith(heading):
                out, level = [line], len(m.group(1))
            continue
        if m:
            break
        out.append(line)
    if out is None:
        raise ValueError(f"no section starting {heading!r}")
    return level, out


def include(target: str, page_src: str, level: int) -> str:
    """The section `PATH#HEADING` (PATH from the repository root), its heading moved to `level`, relative links
    rewritten for the page: into docs/ as page links, elsewhere as their text."""
    path, _, heading = target.partition("#")
    _, lines = section((ROOT / path).read_text(), heading.replace("-", " "))
    page_dir = posixpath.dirname(posixpath.join("docs", page_src))

    def relink(m):
        text, href, anchor = m.group(1), m.group(2), m.group(3) or ""
        if re.match(r"[a-z]+:", href):
            return m.group(0)
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), href))
        if resolved.startswith("docs/"):
            return f"[{text}]({posixpath.relpath(resolved, page_dir)}{anchor})"
        return text

    out = ["#" * level + " " + HEADING.match(lines[0]).group(2)]
    fence = False
    for line in lines[1:]:
        if line.startswith("```"):
            fence = not fence
        out.append(line if fence else LINK.sub(relink, line))
    return "\n".join(out)


def include_level(target: str, done: str) -> int:
    """A file's title (an h1 section) becomes a section of the page (h2); any other section nests one level
    below the last heading of the page so far (`done`: the page's markdown up to the marker, includes expanded)."""
    path, _, heading = target.partition("#")
    own, _ = section((ROOT / path).read_text(), heading.replace("-", " "))
    if own == 1:
        return 2
    levels = [len(m.group(1)) for m in HEADINGS.finditer(done)]
    return min(6, (levels[-1] if levels else 1) + 1)


def snippet(target: str) -> str:
    """The file `target` (relative to the repository root) as a fenced code block."""
    path = ROOT / target
    if not path.is_file() or path.suffix not in SNIPPET_LANGUAGES:
        raise ValueError(f"snippet {target!r}: no such file, or not one of {sorted(SNIPPET_LANGUAGES)}")
    text = path.read_text()
    if "```" in text:
        raise ValueError(f"snippet {target!r}: holds a code fence")
    return f"```{SNIPPET_LANGUAGES[path.suffix]}\n{text.rstrip()}\n```"


def on_page_markdown(markdown: str, page, config, files) -> str:
    """mkdocs entry point: replace each marker of the page, in order."""
    out, pos = [], 0
    for m in MARKER.finditer(markdown):
        out.append(markdown[pos:m.start()])
        kind, name = m.group(1), m.group(2)
        if kind == "generated":
            out.append(_generated(name))
        elif kind == "snippet":
            out.append(snippet(name))
        else:
            out.append(include(name, page.file.src_uri, include_level(name, "".join(out))))
        pos = m.end()
    out.append(markdown[pos:])
    return "".join(out)
