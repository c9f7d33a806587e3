"""The layout rules of service/, checked on the source: who may talk to the database,
where SQL may be written, and that no two modules import each other (even by a longer way
round). docs/ARCHITECTURE.md explains them; each test names the rule it pins."""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVICE = ROOT / "service"
STORAGE = SERVICE / "storage"

# A statement, not prose: a keyword followed by what only SQL puts after it.
_SQL = re.compile(r"\b(SELECT\s+[\w*(]|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|"
                  r"CREATE\s+(TABLE|INDEX|TRIGGER)|PRAGMA\s+\w)")


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(SERVICE.rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        yield name.removesuffix(".__init__"), path


def _strings(tree: ast.AST) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value


def _is_docstring_holder(node: ast.AST) -> bool:
    return isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)


def _code_strings(tree: ast.Module) -> Iterator[str]:
    """Every string constant that is not a docstring (docs may name SQL; code may not)."""
    docstrings: set[int] = set()
    for node in ast.walk(tree):
        if _is_docstring_holder(node):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docstrings:
            yield node.value


def test_only_the_storage_package_imports_sqlite3() -> None:
    importers = []
    for name, path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if "sqlite3" in names:
                importers.append(name)
    assert importers
    assert all(name.startswith("service.storage.") for name in importers), importers


def test_sql_is_written_only_in_the_storage_package() -> None:
    outside = []
    for name, path in _modules():
        if path.is_relative_to(STORAGE):
            continue
        tree = ast.parse(path.read_text())
        outside += [f"{name}: {text.strip()[:60]!r}" for text in _code_strings(tree)
                    if _SQL.search(text)]
    assert outside == []


def test_each_table_is_written_by_one_module() -> None:
    """A table's writes (INSERT/UPDATE/DELETE) stand in one table module; the migrations
    and the triggers they install are the schema's, not a writer's."""
    writers: dict[str, set[str]] = {}
    # ``FOR UPDATE`` is a row lock on a SELECT, not a write.
    write = re.compile(r"\b(?:INSERT\s+INTO|(?<!FOR )UPDATE|DELETE\s+FROM)\s+(\w+)")
    for name, path in _modules():
        if not path.is_relative_to(STORAGE) or name.endswith(
                (".migrations", ".migrate", ".pg_schema")):
            continue
        for text in _strings(ast.parse(path.read_text())):
            for table in write.findall(text):
                if table.upper() not in ("OF", "SET"):  # a trigger; ON CONFLICT DO UPDATE
                    writers.setdefault(table, set()).add(name)
    # A table too large for one module is written by modules named for it
    # (``queue``, ``queue_enqueue``, ``queue_lease``), each one side of its lifecycle.
    shared = {table: sorted(mods) for table, mods in writers.items()
              if any(m.rpartition(".")[2].partition("_")[0] != table
                     and m.rpartition(".")[2] != table for m in mods) and len(mods) > 1}
    assert "queue" in writers and "ledger" in writers
    assert len(writers["queue"]) == 3
    assert shared == {}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The service modules ``name`` imports when it is loaded (TYPE_CHECKING blocks too:
    a circle of annotations is still a circle of meaning)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [module] + [f"{module}.{a.name}" for a in node.names]
        for target in targets:
            if target in known and target != name:
                found.add(target)
    # Importing a submodule of one's own package is not an import of that package back.
    return {t for t in found if not name.startswith(t + ".")}


def test_no_import_circle_in_service() -> None:
    modules = dict(_modules())
    known = set(modules)
    graph = {name: _imports(name, path, known) for name, path in modules.items()}
    circles: list[list[str]] = []
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    assert circles == []


def test_the_checks_see_what_they_look_for() -> None:
    """The rules above would pass vacuously if the scans found nothing."""
    queue = (STORAGE / "queue.py").read_text()
    assert _SQL.search(queue)
    assert not _SQL.search("select one of these: update the docs, then delete from memory")


def test_nothing_below_the_composition_root_imports_it() -> None:
    """``service.app.daemon`` wires everything; only the entry points above it import it."""
    modules = dict(_modules())
    known = set(modules)
    importers = sorted(name for name, path in modules.items()
                       if "service.app.daemon" in _imports(name, path, known))
    assert importers == ["service.app.first_run", "service.cli.main"]


#: The packages of service/, lowest first, along the data path: a package imports only
#: packages of lower layers (and its own). One layer's packages do not import each other.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"model", "runtime"}),   # the shared vocabulary; waiting and watching
    frozenset({"config"}),             # both config files, one declaration mechanism
    frozenset({"storage", "github"}),  # the two edges: the database, GitHub
    frozenset({"budget"}),             # the governor
    frozenset({"observe", "engine"}),  # health, logs, metrics; the review engines
    frozenset({"intake"}),             # webhook, trigger rules, poller, ingest
    frozenset({"publish"}),            # the run, check runs, the eyes, speaking as the App
    frozenset({"review"}),             # pool and job: a claim to a recorded run
    frozenset({"app"}),                # the composition root, roles, the HTTP app
    frozenset({"cli"}),                # every command
)


def _package(module: str) -> str:
    return module.split(".")[1]


def test_service_holds_only_packages_and_they_are_the_layers() -> None:
    loose = sorted(p.name for p in SERVICE.glob("*.py")
                   if p.name not in {"__init__.py", "__main__.py"})
    packages = {p.name for p in SERVICE.iterdir()
                if p.is_dir() and (p / "__init__.py").exists()}
    assert loose == []
    assert packages == set().union(*LAYERS)


def test_no_package_imports_upward() -> None:
    """docs/ARCHITECTURE.md's layers: each package sees only those beneath it."""
    rank = {name: i for i, layer in enumerate(LAYERS) for name in layer}
    modules = dict(_modules())
    known = set(modules) - {"service"}
    upward = []
    for name, path in modules.items():
        if name in {"service", "service.__main__"}:
            continue
        mine = _package(name)
        for target in _imports(name, path, known):
            theirs = _package(target)
            if theirs != mine and rank[theirs] >= rank[mine]:
                upward.append(f"{name} imports {target}")
    assert upward == []


def test_no_package_re_exports_its_modules() -> None:
    """A name is imported from the module that defines it: an ``__init__`` holds a docstring."""
    facades = sorted(name for name, path in _modules()
                     if path.name == "__init__.py" and name != "service"
                     and any(isinstance(node, ast.Import | ast.ImportFrom)
                             for node in ast.parse(path.read_text()).body))
    assert facades == []


def test_tests_import_no_test_module_and_no_private_name() -> None:
    """A test module holds tests; what several share lives in a support module (not named
    ``test_*``), and tests reach the code through its public names."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or not node.module:
                continue
            where = path.relative_to(ROOT)
            if node.module.split(".")[-1].startswith("test_"):
                found.append(f"{where}: imports the test module {node.module}")
            if node.module.startswith("tests"):
                found += [f"{where}: imports the test module {node.module}.{a.name}"
                          for a in node.names if a.name.startswith("test_")]
            if node.module.startswith("service"):
                found += [f"{where}: imports {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    assert found == []


#: Storage modules with no PostgreSQL case of their own, and why.
_ONE_BACKEND = {
    "__init__": "a docstring only",
    "sqlite": "the SQLite backend itself (tests/storage/test_sqlite.py)",
    "database": "the protocol both backends implement (tested through each of them)",
    "times": "the time codec: text in, text out, no database",
    "lifecycle": "the transition-table type: states and events, no database",
    "errors": "the error classes (is_contention and is_unavailable are tested on each "
              "backend in test_sqlite.py and test_postgres.py)",
}
#: What marks a test module as running on PostgreSQL: the two-backend ``database``
#: fixture (or the publisher rig or the queue's store built on it), or PostgreSQL made by
#: hand.
_POSTGRES_MARKS = frozenset({"database", "rig", "BACKENDS", "throwaway_database",
                             "PostgresStore", "private_cluster", "both_backends_store"})


def _runs_on_postgres(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if {a.arg for a in node.args.args} & _POSTGRES_MARKS:
                return True
        elif isinstance(node, ast.Name) and node.id in _POSTGRES_MARKS:
            return True
        elif isinstance(node, ast.alias) and node.name in _POSTGRES_MARKS:
            return True  # a fixture on both backends, imported to be used
    return False


def test_every_storage_module_has_tests_that_run_on_postgresql() -> None:
    """A statement one backend cannot run (issue 35: ``repository_polls`` on PostgreSQL)
    is caught by its own module's tests: each module under ``service/storage/`` has
    ``tests/storage/test_<module>.py``, and it runs on PostgreSQL as well as SQLite."""
    missing, sqlite_only = [], []
    for path in sorted(STORAGE.glob("*.py")):
        name = path.stem
        if name in _ONE_BACKEND:
            continue
        test = ROOT / "tests" / "storage" / f"test_{name}.py"
        if not test.exists():
            missing.append(str(test.relative_to(ROOT)))
        elif not _runs_on_postgres(test):
            sqlite_only.append(str(test.relative_to(ROOT)))
    assert missing == [] and sqlite_only == [], (missing, sqlite_only)
    assert not _runs_on_postgres(ROOT / "tests" / "test_architecture.py")  # not vacuous


#: Classes of dependencies that their documentation offers for subclassing, and where.
_DOCUMENTED_BASES = {
    "yaml.SafeLoader": "PyYAML's docs: a Loader of one's own carries its own constructors",
    "prometheus_client.registry.Collector": "prometheus_client's docs: custom collectors",
}


def _third_party(module: str) -> bool:
    top = module.split(".", maxsplit=1)[0]
    return bool(top) and top != "service" and top not in sys.stdlib_module_names


def test_nothing_reaches_into_a_dependencys_private_code() -> None:
    """No underscore module or name of a third-party package is imported or read, and no
    class of one is subclassed unless its documentation offers it for that: a rename in a
    dependency cannot break the service at run time, and no protection a dependency adds
    is skipped by an override."""
    found: list[str] = []
    for name, path in _modules():
        tree = ast.parse(path.read_text())
        imported: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    imported[(alias.asname or alias.name).split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0])
                    if _third_party(alias.name) and any(
                            part.startswith("_") for part in alias.name.split(".")):
                        found.append(f"{name}: imports {alias.name}")
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                if _third_party(node.module):
                    parts = [*node.module.split("."), *(a.name for a in node.names)]
                    found += [f"{name}: imports {node.module}.{p}" for p in parts
                              if p.startswith("_") and not p.startswith("__")]
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__") and isinstance(node.value, ast.Name)
                    and _third_party(imported.get(node.value.id, ""))):
                found.append(f"{name}: reads {imported[node.value.id]}.{node.attr}")
            if isinstance(node, ast.ClassDef):
                for base in node.bases:
                    head, _, rest = ast.unparse(base).split("[")[0].partition(".")
                    origin = imported.get(head, "")
                    full = f"{origin}.{rest}" if rest else origin
                    if _third_party(full) and full not in _DOCUMENTED_BASES:
                        found.append(f"{name}: class {node.name} subclasses {full}")
    assert found == []


def test_the_private_code_rule_sees_what_it_looks_for() -> None:
    """Not vacuous: the allowed subclasses are found as subclasses."""
    sources = "".join(path.read_text() for _, path in _modules())
    assert "yaml.SafeLoader" in sources and "Collector" in sources


def test_one_nap_wakes_the_loops() -> None:
    """Every loop's wait between passes is ``runtime/nap.py``'s ``Nap``: only it schedules a
    wake-up from another thread onto a loop."""
    found = [name for name, path in _modules()
             if "call_soon_threadsafe" in path.read_text() and name != "service.runtime.nap"]
    assert found == []


#: The most lines a module may hold: past it, a module is doing more than one job.
MODULE_LINES = 400


def test_modules_stay_within_400_lines() -> None:
    """Modules are cut by what they do, before they reach this size."""
    long = {name: n for name, path in _modules()
            if (n := len(path.read_text().splitlines())) > MODULE_LINES}
    assert long == {}


def _opens_a_transaction(node: ast.AST) -> bool:
    """Whether ``node``'s body enters ``….transaction(…)`` or ``….read()`` itself."""
    for inner in ast.walk(node):
        if isinstance(inner, ast.With):
            for item in inner.items:
                call = item.context_expr
                if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                        and call.func.attr in ("transaction", "read")):
                    return True
    return False


def _store_calls_off_the_loop_by_hand() -> list[str]:
    found = []
    for name, path in _modules():
        if path.is_relative_to(STORAGE):
            continue
        tree = ast.parse(path.read_text())
        functions = {f.name: f for f in ast.walk(tree)
                     if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)}
        for call in ast.walk(tree):
            if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "run_sync" and call.args
                    and isinstance(call.args[0], ast.Name)
                    and call.args[0].id in functions
                    and _opens_a_transaction(functions[call.args[0].id])):
                found.append(f"{name}: {call.args[0].id}")
    return found


def test_store_calls_go_off_the_loop_through_the_database() -> None:
    """``Database.read_async``/``write_async``/``run`` are the one way a coroutine runs a
    store call on a worker thread: no module hands a function that opens its own
    transaction to ``anyio.to_thread.run_sync``."""
    assert _store_calls_off_the_loop_by_hand() == []


def test_the_off_loop_rule_sees_what_it_looks_for() -> None:
    """Not vacuous: a function that opens a transaction is recognised."""
    tree = ast.parse("def work():\n    with store.transaction() as tx:\n        pass\n")
    assert _opens_a_transaction(tree.body[0])
    assert not _opens_a_transaction(ast.parse("def work(tx):\n    tx.execute('')\n").body[0])


def test_what_the_services_compose_reads_them_and_never_writes_into_them() -> None:
    """``Services`` is built once by the composition root and read; the one field it
    replaces is ``config``, at a SIGHUP reload. Fan-out goes through a ``Bell``."""
    writes = []
    for name, path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("append", "extend", "insert", "update"):
                targets = [node.func.value]
            for target in targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                        and target.value.id == "services" \
                        and (name, target.attr) != ("service.app.daemon", "config"):
                    writes.append(f"{name}: services.{target.attr}")
    assert writes == []


def test_one_launcher_starts_serve_and_the_simulator_and_one_free_port() -> None:
    """``tests/kit/processes.py`` is the one place that starts ``serve`` or the standalone
    simulator as a process (the benchmarks, which start older checkouts and peers, aside),
    and ``tests/kit/ports.py`` the one that defines ``free_port``."""
    launches, ports = [], []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path.is_relative_to(ROOT / "tests" / "bench") or path == Path(__file__):
            continue
        tree = ast.parse(path.read_text())
        strings = list(_code_strings(tree))
        where = str(path.relative_to(ROOT))
        if "tests.simulator" in strings or ("service" in strings and "serve" in strings
                                            and "-m" in strings):
            launches.append(where)
        ports += [where for node in ast.walk(tree)
                  if isinstance(node, ast.FunctionDef) and node.name == "free_port"]
    assert launches == ["tests/kit/processes.py"]
    assert ports == ["tests/kit/ports.py"]


#: Modules that declare and do nothing to test on their own (types, a protocol).
_DECLARATIONS_ONLY = {
    "github/actors": "three names: the App actor, the Actor and Clock types",
    "publish/ports": "the Protocol the worker publishes through",
    "budget/refusal": "the Refusal record and the metrics Protocol the governor reports to",
}


def test_every_module_has_its_own_test_file() -> None:
    """``service/<package>/<module>.py`` is tested in ``tests/<package>/test_<module>.py``
    (or ``test_<module>_<aspect>.py`` when one file would be too long), so that a reader
    finds a module's tests where its name says; a module that only declares names is
    listed in ``_DECLARATIONS_ONLY`` with why."""
    modules = [path.relative_to(SERVICE).with_suffix("") for path in sorted(
        SERVICE.rglob("*.py")) if path.name not in ("__init__.py", "__main__.py")]
    owner: dict[Path, Path] = {}  # each test file belongs to the longest module name it has
    for test in (path.relative_to(ROOT / "tests") for path in (ROOT / "tests").rglob(
            "test_*.py")):
        names = [m for m in modules if m.parent == test.parent and (
            test.stem == f"test_{m.name}" or test.stem.startswith(f"test_{m.name}_"))]
        if names:
            owner[test] = max(names, key=lambda m: len(m.name))
    tested = {str(m) for m in owner.values()}
    without = [str(m) for m in modules
               if str(m) not in tested and str(m) not in _DECLARATIONS_ONLY]
    assert without == [], "modules without tests/<package>/test_<module>.py"
    declared_but_tested = sorted(set(_DECLARATIONS_ONLY) & tested)
    assert declared_but_tested == [], "has a test file: take it out of _DECLARATIONS_ONLY"
    gone = {k for k in _DECLARATIONS_ONLY if not (SERVICE / f"{k}.py").exists()}
    assert gone == set(), "listed modules that no longer exist"
