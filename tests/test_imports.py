"""The project's import graph: no cycles, counting imports inside functions too (an import moved into a function
to dodge a cycle still makes one); no project imports inside functions; `train/` and `experiments/` reaching the
envs only through their public packages; the library (nexus_jax, train, bench) never importing a study, and a
study (experiments/<study>/) importing no other study and no private name."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ("nexus_jax", "train", "bench")
PACKAGES = LIBRARY + ("experiments",)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


def project_imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules `path` imports, at the top level or inside functions."""
    out = set()
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        out.update(n for n in names if n in modules)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    modules = project_modules()
    graph = {m: project_imports(p, modules) - {m} for m, p in modules.items()}
    assert sum(len(v) for v in graph.values()) > 50  # the parser does see the project's imports
    assert cycles(graph) == []


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]



def _imports(path: Path, source: str | None = None):
    """(import node, inside a function?, [absolute module names it names]) for every import in `path`."""
    tree = ast.parse(path.read_text() if source is None else source)
    in_func = {id(x) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
               for x in ast.walk(f)}
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield node, id(node) in in_func, [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            yield node, id(node) in in_func, [base] + [f"{base}.{a.name}" for a in node.names]


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def private_env_imports(path: Path, modules: dict[str, Path], source: str | None = None) -> list[str]:
    """Env modules below an env's package, or underscore modules of nexus_jax, that `path` imports."""
    bad = []
    for node, _, names in _imports(path, source):
        for name in names:
            if name not in modules or not name.startswith("nexus_jax"):
                continue
            parts = name.split(".")
            if any(p.startswith("_") for p in parts) or (parts[:2] == ["nexus_jax", "envs"] and len(parts) > 3):
                bad.append(f"{_rel(path)}:{node.lineno} imports {name}")
    return bad


def test_train_and_experiments_use_only_the_public_env_api():
    """A trainer or a study sees an env only through `nexus_jax`, `nexus_jax.envs.<env>` and their exported names."""
    modules = project_modules()
    train_files = list((ROOT / "train").rglob("*.py")) + list((ROOT / "experiments").rglob("*.py"))
    bad = [b for p in train_files for b in private_env_imports(p, modules)]
    assert bad == []


def test_private_env_import_detector():
    modules = project_modules()
    source = ("from nexus_jax.envs.nexus import core\nfrom nexus_jax.envs.nexus.npc import npc_actions\n"
              "from nexus_jax.envs.nexus import seat_masks\nimport nexus_jax\n")
    bad = private_env_imports(ROOT / "train" / "probe.py", modules, source)
    assert [b.rsplit(" ", 1)[1] for b in bad] == ["nexus_jax.envs.nexus.core", "nexus_jax.envs.nexus.npc"]


def function_level_imports(path: Path, modules: dict[str, Path]) -> list[str]:
    return [f"{_rel(path)}:{node.lineno}" for node, in_func, names in _imports(path)
            if in_func and any(n in modules for n in names)]


def test_no_project_imports_inside_functions():
    """Imports of project modules sit at the top of the file: the import graph is the one the cycle test sees,
    and a module's dependencies are read in one place (optional third-party extras may still load lazily)."""
    modules = project_modules()
    files = list(modules.values())
    bad = [b for p in files for b in function_level_imports(p, modules)]
    assert bad == []


def boundary_violations(path: Path, source: str | None = None) -> list[str]:
    """Imports that cross the library/studies boundary: a library module importing `experiments`; a study
    module importing another study, or a `_`-prefixed module or name."""
    bad = []
    mod = module_name(path)
    study = mod.split(".")[:2] if mod.startswith("experiments.") else None  # tests/ and the packages: library
    for node, _, names in _imports(path, source):
        for name in names:
            parts = name.split(".")
            if study is None:
                if parts[0] == "experiments":
                    bad.append(f"{_rel(path)}:{node.lineno} (library) imports {name}")
            elif parts[0] == "experiments" and len(parts) > 1 and parts[:2] != study:
                bad.append(f"{_rel(path)}:{node.lineno} imports another study: {name}")
            elif any(p.startswith("_") and p != "__future__" for p in parts):
                bad.append(f"{_rel(path)}:{node.lineno} imports a private name: {name}")
    return bad


def test_library_imports_no_study_and_studies_only_the_public_api():
    """Library tests (tests/) count as library: a study's tests live beside it in experiments/<study>/."""
    files = [p for pkg in PACKAGES + ("tests",) for p in (ROOT / pkg).rglob("*.py")]
    assert any(module_name(p).startswith("experiments.") for p in files)
    assert [b for p in files for b in boundary_violations(p)] == []


def test_boundary_detector():
    probe = ROOT / "experiments" / "crisis" / "probe.py"
    source = ("from experiments.crisis import evaluate\nfrom experiments.research import questions\n"
              "from train.suite.cli import _jsonable\nfrom nexus_jax import _core\nimport train.runtime\n")
    bad = boundary_violations(probe, source)
    assert [b.split(": ", 1)[1] for b in bad] == ["experiments.research", "experiments.research.questions",
                                                  "train.suite.cli._jsonable", "nexus_jax._core"]
    lib = boundary_violations(ROOT / "train" / "probe.py", "from experiments.crisis import evaluate\n")
    assert len(lib) == 2 and all("(library)" in b for b in lib)
