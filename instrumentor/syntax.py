"""Questions about libcst statements and expressions that the rewriter asks before changing them."""

from __future__ import annotations

import unicodedata

import libcst as cst


def identifier(name: str) -> str:
    """The name as Python reads it: NFKC-normalised (PEP 3131; `ﬁnd` is `find`), as `ast` gives it."""
    return name if name.isascii() else unicodedata.normalize("NFKC", name)


def dotted(expr: cst.BaseExpression) -> str:
    if isinstance(expr, cst.Call):
        expr = expr.func
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        left = dotted(expr.value)
        return f"{left}.{expr.attr.value}" if left else ""
    return ""


def is_docstring(stmt: cst.BaseStatement) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def split_docstring(stmt: cst.BaseStatement) -> list[cst.SimpleStatementLine] | None:
    """`"doc"; x = 1` as two lines, so that the probes can go between them (the docstring must stay
    the first statement for `__doc__`); None when `stmt` is not a docstring followed by `;`."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) < 2:
        return None
    first = stmt.body[0]
    if not (isinstance(first, cst.Expr) and isinstance(first.value, (cst.SimpleString, cst.ConcatenatedString))):
        return None
    doc = cst.SimpleStatementLine([first.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)], leading_lines=stmt.leading_lines)
    return [doc, stmt.with_changes(body=stmt.body[1:], leading_lines=())]


def is_trivial(stmt: cst.BaseStatement) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for small in stmt.body:
        if isinstance(small, cst.Pass):
            continue
        if isinstance(small, cst.Expr) and isinstance(small.value, (cst.Ellipsis, cst.SimpleString, cst.ConcatenatedString)):
            continue
        return False
    return True


def is_type_checking(test: cst.BaseExpression) -> bool:
    if isinstance(test, cst.Name):
        return test.value == "TYPE_CHECKING"
    return isinstance(test, cst.Attribute) and test.attr.value == "TYPE_CHECKING"


def suite_statements(suite: cst.BaseSuite) -> list[cst.BaseStatement]:
    if isinstance(suite, cst.IndentedBlock):
        return list(suite.body)
    return [cst.SimpleStatementLine([small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)]) for small in suite.body]
