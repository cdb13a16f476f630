"""What a source file imports, read from its syntax tree: the layering tests' one reader."""

import ast


def imported_modules(path):
    """The absolute module names ``path`` imports (relative imports stay inside its package)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
