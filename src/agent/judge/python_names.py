# The syntax and names check of a workspace's Python files, run by the judge (names.rs)
# with `python3 -c` under the sandbox, in the workspace, over the paths it is given (the judge
# finds them: the workspace's Python files, or the changed ones). It prints one JSON object:
# "checked", the paths it read, and "problems", each {"path", "line", "key", "text"}: a syntax error, or a name read that nothing defines (not
# the file, not an import, not Python's builtins; pyflakes' F821), found with the standard
# library's own parser and symbol tables. Which problems are the task's is the caller's to say.
import ast
import builtins
import json
import os
import symtable
import sys

MAX_BYTES = 256 * 1024
# Names every module has without defining them.
MODULE_NAMES = set(dir(builtins)) | {
    "__file__", "__name__", "__doc__", "__builtins__", "__spec__", "__loader__",
    "__package__", "__path__", "__annotations__", "__cached__", "__dict__", "__class__",
}


def problems(text, path):
    """[(key, line, text)]: the file's syntax error, or the names it reads that nothing defines."""
    try:
        tree = compile(text, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
        top = symtable.symtable(text, path, "exec")
    except SyntaxError as e:
        return [("syntax", e.lineno or 0, "syntax error: %s" % e.msg)]
    except (ValueError, RecursionError, MemoryError):
        return []
    # `from x import *` may define any name: no name of the file is judged.
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return []
    bound = set(MODULE_NAMES)
    for sym in top.get_symbols():
        if sym.is_assigned() or sym.is_imported() or sym.is_namespace() or sym.is_parameter():
            bound.add(sym.get_name())
    read = set()
    stack = [top]
    while stack:
        table = stack.pop()
        stack.extend(table.get_children())
        for sym in table.get_symbols():
            # A name a function declares `global` and assigns is the module's too.
            if sym.is_declared_global() and sym.is_assigned():
                bound.add(sym.get_name())
            if sym.is_referenced() and (sym.is_global() or table is top):
                read.add(sym.get_name())
    missing = read - bound
    first = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in missing and isinstance(node.ctx, ast.Load):
            first[node.id] = min(first.get(node.id, node.lineno), node.lineno)
    return [
        ("name " + name, line,
         "undefined name '%s': nothing in the file, its imports or Python's builtins defines it"
         % name)
        for name, line in sorted(first.items(), key=lambda kv: kv[1])
    ]


def main(paths):
    out = {"checked": [], "problems": []}
    for path in paths:
        try:
            if os.path.islink(path) or os.path.getsize(path) > MAX_BYTES:
                continue
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            continue
        out["checked"].append(path)
        for key, line, what in problems(text, path):
            out["problems"].append({"path": path, "line": line, "key": key, "text": what})
    json.dump(out, sys.stdout)


main(sys.argv[1:])
