"""Facts about a module gathered with the C-speed `ast` parser, for the libcst rewriter.

libcst only knows line numbers through its PositionProvider, which costs 2.5x a parse. `ast` gives
them for a tenth of a libcst round trip, so the rewriter walks both trees in the same pre-order and
takes lines, loop kinds and marker comments from here.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from .linemap import split_lines
from .results import Skip

_TRY = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)  # except* is 3.11+

# Nodes that get one fact each, in pre-order; the rewriter must visit exactly these.
SCOPE_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.AsyncFor, ast.While)
_MARKER = re.compile(r"#\s*scaleprobe:\s*(epoch|step|off)\b")
_OPTIMIZER_HINT = re.compile(r"opt|scaler", re.IGNORECASE)
# Expressions with a scope of their own that are not regions: (name as Python's code objects have it, reason)
_UNTIMED = {
    ast.ListComp: ("<listcomp>", "comprehension"),
    ast.SetComp: ("<setcomp>", "comprehension"),
    ast.DictComp: ("<dictcomp>", "comprehension"),
    ast.GeneratorExp: ("<genexpr>", "comprehension"),
    ast.Lambda: ("<lambda>", "lambda"),
}


@dataclass
class Fact:
    node: ast.AST
    line: int
    size: int = 0  # facts strictly inside this one (skipping a subtree skips this many)
    marker: str | None = None  # "epoch" | "step" | "off" from a `# scaleprobe:` comment
    loop_kind: str = "loop"  # "loop" | "epoch" | "step" (loops only)
    parent_loop: int | None = None
    step_candidate: bool = False
    candidate_below: bool = False


@dataclass
class ModuleFacts:
    facts: list[Fact] = field(default_factory=list)


def is_type_checking_test(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def collect(tree: ast.Module, source: str, epoch_callees: frozenset[str] = frozenset()) -> ModuleFacts:
    """Return one fact per scope node (and per `if TYPE_CHECKING:`), in the rewriter's order.

    `epoch_callees`: names of functions of other modules of the project that run one epoch (hold a
    step loop outside any loop of theirs, `epoch_bodies`): a loop calling one is an epoch loop."""
    lines = split_lines(source)  # as ast counts lines: not at form feeds
    has_markers = "scaleprobe:" in source
    facts: list[Fact] = []

    def marker_for(node: ast.AST) -> str | None:
        first = node.lineno
        for dec in getattr(node, "decorator_list", ()):
            first = min(first, dec.lineno)
        if 1 <= node.lineno <= len(lines):
            found = _MARKER.search(lines[node.lineno - 1])
            if found:
                return found.group(1)
        # the line above counts only when it holds nothing but the comment: above a step loop is
        # often the marked epoch loop's own header, whose marker is not the step loop's
        if 1 <= first - 1 <= len(lines):
            above = lines[first - 2]
            found = _MARKER.search(above)
            if found and above.lstrip().startswith("#"):
                return found.group(1)
        return None

    def walk_body(stmts: list[ast.stmt], loop: int | None) -> None:
        for stmt in stmts:
            visit(stmt, loop)

    def visit(stmt: ast.stmt, loop: int | None) -> None:
        if isinstance(stmt, SCOPE_TYPES):
            index = len(facts)
            fact = Fact(stmt, stmt.lineno, parent_loop=loop)
            if has_markers:
                fact.marker = marker_for(stmt)
            facts.append(fact)
            if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
                walk_body(stmt.body, index)
                walk_body(stmt.orelse, index)
            else:
                walk_body(stmt.body, None)  # loops never span a function or class boundary
            fact.size = len(facts) - index - 1
        elif isinstance(stmt, ast.If):
            if is_type_checking_test(stmt.test):
                index = len(facts)
                fact = Fact(stmt, stmt.lineno)
                facts.append(fact)
                walk_body(stmt.body, loop)
                fact.size = len(facts) - index - 1
            else:
                walk_body(stmt.body, loop)
            walk_body(stmt.orelse, loop)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            walk_body(stmt.body, loop)
        elif isinstance(stmt, _TRY):
            walk_body(stmt.body, loop)
            for handler in stmt.handlers:
                walk_body(handler.body, loop)
            walk_body(stmt.orelse, loop)
            walk_body(stmt.finalbody, loop)
        elif isinstance(stmt, ast.Match):
            for case in stmt.cases:
                walk_body(case.body, loop)

    walk_body(tree.body, None)
    if "backward" in source or ".step(" in source or has_markers or epoch_callees:
        _classify_loops(facts, lines, epoch_callees)
    return ModuleFacts(facts)


def epoch_bodies(facts: list[Fact]) -> set[str]:
    """Names of the functions and methods that hold a step loop outside any loop of their own: each
    call runs one epoch (`Trainer.train_epoch`), so a loop calling one, in another module too, is an
    epoch loop."""
    names: set[str] = set()
    for _, fact, around in _with_functions(facts):
        if fact.loop_kind == "step" and fact.parent_loop is None and around:
            function = facts[around[-1]].node
            # a generator's caller iterates it per step, not per epoch; a name that common APIs
            # have too (`model.train()`, `subprocess.run()`) would make their callers' loops epochs
            if not _is_generator(function) and function.name not in _COMMON_NAMES:  # type: ignore[attr-defined]
                names.add(function.name)  # type: ignore[attr-defined]
    return names


_COMMON_NAMES = frozenset({
    "train", "eval", "run", "fit", "step", "forward", "main", "call", "__call__", "start", "execute", "update",
    "apply", "process", "loop", "test", "evaluate", "predict", "validate", "setup", "__init__", "__iter__",
})


def _is_generator(function: ast.AST) -> bool:
    """Whether the function itself yields (its nested functions and classes do not count)."""
    todo = list(ast.iter_child_nodes(function))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))
    return False


def _with_functions(facts: list[Fact]):
    """(index, fact, indexes of the functions around it, innermost last) for every fact, in order."""
    stack: list[tuple[int, int]] = []  # (function fact index, end of its subtree)
    for i, fact in enumerate(facts):
        while stack and i > stack[-1][1]:
            stack.pop()
        yield i, fact, [index for index, _ in stack]
        if isinstance(fact.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            stack.append((i, i + fact.size))


def untimed_expressions(tree: ast.Module, source: str) -> list[Skip]:
    """The comprehensions and lambdas of a module, which are not regions (their time counts in the
    region around them), for the "skipped" summary. A walk of every node costs about 4 % of a libcst
    round trip; a module without `for` or `lambda` needs none."""
    if "for" not in source and "lambda" not in source:
        return []
    found = []
    for node in ast.walk(tree):
        untimed = _UNTIMED.get(type(node))
        if untimed is not None:
            found.append(Skip(untimed[0], node.lineno, untimed[1]))
    return found


def _called_names(node: ast.AST) -> tuple[bool, set[str]]:
    """Whether `node` calls `.backward()`/`<optimizer>.step()` itself, and the names it calls."""
    trains, names = False, set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            func = sub.func
            if isinstance(func, ast.Attribute):
                names.add(func.attr)
                if func.attr == "backward" or (
                    func.attr == "step" and _OPTIMIZER_HINT.search(ast.unparse(func.value))
                ):
                    trains = True
            elif isinstance(func, ast.Name):
                names.add(func.id)
    return trains, names


class _Callees:
    """Follows calls to the module's own functions and methods (by name), a few levels deep."""

    def __init__(self, facts: list[Fact]) -> None:
        self.functions: dict[str, list[int]] = {}
        for i, fact in enumerate(facts):
            if isinstance(fact.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(fact.node.name, []).append(i)
        self.facts = facts
        self._calls: dict[int, tuple[bool, set[str]]] = {}

    def calls(self, index: int) -> tuple[bool, set[str]]:
        if index not in self._calls:
            self._calls[index] = _called_names(self.facts[index].node)
        return self._calls[index]

    def reaches(self, names: set[str], want, depth: int = 3) -> bool:
        """Does a call to one of `names` reach a function for which `want(index)` holds?"""
        if depth == 0:
            return False
        for name in names:
            for index in self.functions.get(name, ()):
                if want(index) or self.reaches(self.calls(index)[1], want, depth - 1):
                    return True
        return False


def _inside_step(facts: list[Fact], index: int) -> bool:
    parent = facts[index].parent_loop
    while parent is not None:
        if facts[parent].loop_kind == "step":
            return True
        parent = facts[parent].parent_loop
    return False


def _classify_loops(facts: list[Fact], lines: list[str], epoch_callees: frozenset[str] = frozenset()) -> None:
    """Innermost `for` loop that trains (calls `.backward()`/`opt.step()`, itself or through the
    module's own functions) is a step loop; the loop around it, or a loop calling a function that
    holds a step loop, is an epoch loop."""
    callees = _Callees(facts)
    for i, fact in enumerate(facts):
        if isinstance(fact.node, ast.For):
            trains, names = callees.calls(i)
            if trains or callees.reaches(names, lambda j: callees.calls(j)[0]):
                fact.step_candidate = True
                parent = fact.parent_loop
                while parent is not None:
                    facts[parent].candidate_below = True
                    parent = facts[parent].parent_loop
    def holds_candidate(j: int) -> bool:
        return any(facts[k].step_candidate for k in range(j + 1, j + 1 + facts[j].size))

    for i, fact in enumerate(facts):
        if fact.step_candidate and not fact.candidate_below:
            # a loop that calls into a function with a training loop of its own is not the step loop
            if callees.reaches(callees.calls(i)[1], holds_candidate):
                fact.candidate_below = True
    owner_of_step: set[int] = set()
    for i, fact, around in _with_functions(facts):
        if fact.step_candidate and not fact.candidate_below:
            fact.loop_kind = "step"
            owner_of_step.update(around)
            parent = fact.parent_loop
            if parent is not None and facts[parent].loop_kind == "loop":
                facts[parent].loop_kind = "epoch"
    if owner_of_step or epoch_callees:
        external = []  # loops calling another module's epoch function: the innermost ones are epochs
        for i, fact in enumerate(facts):
            if isinstance(fact.node, (ast.For, ast.While)) and fact.loop_kind == "loop":
                called = callees.calls(i)[1]
                if owner_of_step and callees.reaches(called, lambda j: j in owner_of_step, depth=2):
                    fact.loop_kind = "epoch"
                elif called & epoch_callees and not _inside_step(facts, i):
                    external.append(i)
        for i in external:
            if not any(i < j <= i + facts[i].size for j in external):  # `for rep in ...: for epoch in ...:`
                facts[i].loop_kind = "epoch"
    for fact in facts:
        if fact.marker in ("epoch", "step") and isinstance(fact.node, (ast.For, ast.AsyncFor, ast.While)):
            fact.loop_kind = fact.marker
