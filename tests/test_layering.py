"""The Python package keeps its floors: no import cycle between its modules, and no module imports another's
private (_underscored) names. Read from the source with ast, so an import inside a function counts too."""

import ast
import pathlib
import sys

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "fused_input_norm"
# The compiled extension is a module, not a private name of another file.
COMPILED = {"_C"}


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts) or "__init__"


def package_imports(path: pathlib.Path) -> list[tuple[str, list[str], int]]:
    """(imported module inside the package, names taken from it, line) for every relative import in `path`."""
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" and here != ["__init__"] else here[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            names = [alias.name for alias in node.names]
            if node.module is None:  # from . import a, b: a module of the package, or a name its __init__ holds
                for name in names:
                    module = ".".join([*base, name])
                    where = PACKAGE / pathlib.Path(*module.split("."))
                    if where.with_suffix(".py").exists() or (where / "__init__.py").exists():  # a module or a package
                        found.append((module, [], node.lineno))
                    else:
                        found.append((".".join(base) or "__init__", [name], node.lineno))
            else:
                found.append((target or "__init__", names, node.lineno))
    return found


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    edges = {name: set() for name in modules}
    for name, path in modules.items():
        for target, _, _ in package_imports(path):
            if target in modules and target != name:
                edges[name].add(target)
    return edges


def test_package_has_no_import_cycle():
    edges = graph()
    assert len(edges) > 10, f"found only {sorted(edges)}: is PACKAGE right?"
    state: dict[str, str] = {}
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(edges[node]):
            # An open module is on the path being walked: reaching it again closes a cycle. (A module reaching
            # back to the package's __init__ for a name counts like any other edge.)
            if state.get(nxt) == "open":
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_no_module_imports_another_modules_private_names():
    offences = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for target, names, line in package_imports(path):
            private = [n for n in names if n.startswith("_") and n not in COMPILED]
            if private and target != module_name(path):
                offences.append(f"{path.relative_to(PACKAGE.parent)}:{line} takes {private} from {target}")
    assert not offences, "\n".join(offences)


def test_the_checker_sees_a_cycle_and_a_private_import(tmp_path, monkeypatch):
    """The two checks above on a package made to break both rules: each must report it."""
    fake = tmp_path / "fused_input_norm"
    fake.mkdir()
    (fake / "__init__.py").write_text("from .a import f\n")
    (fake / "a.py").write_text("def f():\n    from .b import _g\n    return _g\n")
    (fake / "b.py").write_text("from .a import f\n\ndef _g():\n    return f\n")
    for i in range(9):  # enough modules to pass the sanity check on the count
        (fake / f"m{i}.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    try:
        test_package_has_no_import_cycle()
    except AssertionError as error:
        assert "a -> b -> a" in str(error)
    else:
        raise AssertionError("the cycle a -> b -> a was not reported")
    try:
        test_no_module_imports_another_modules_private_names()
    except AssertionError as error:
        assert "takes ['_g'] from b" in str(error)
    else:
        raise AssertionError("the private import of _g was not reported")
