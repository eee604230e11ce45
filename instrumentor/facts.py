"""Facts about a module gathered with the C-speed `ast` parser, for the libcst rewriter.

libcst only knows line numbers through its PositionProvider, which costs 2.5x a parse. `ast` gives
them for a tenth of a libcst round trip, so the rewriter walks both trees in the same pre-order and
takes lines, loop kinds and marker comments from here.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import NamedTuple

from .linemap import split_lines
from .results import Skip

_TRY = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)  # except* is 3.11+

# Nodes that get one fact each, in pre-order; the rewriter must visit exactly these.
SCOPE_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.AsyncFor, ast.While)
_MARKER = re.compile(r"#\s*scaleprobe:\s*(epoch|step|off)\b")
_OPTIMIZER_HINT = re.compile(r"opt|scaler", re.IGNORECASE)
_SCHEDULER_HINT = re.compile(r"sched", re.IGNORECASE)  # `opt_scheduler.step()` steps no optimizer
# words of an iterable's names (split at `_`) that make `for opt in <it>: opt.step()` a loop over optimizers
_OPTIMIZER_COLLECTIONS = frozenset({
    "opt", "opts", "optim", "optims", "optimizer", "optimizers", "optimiser", "optimisers", "sched", "scheds",
    "scheduler", "schedulers",
})
_LOOP_TYPES = (ast.For, ast.AsyncFor, ast.While)
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


class _Calls(NamedTuple):
    backward: bool  # calls `.backward()`
    step: bool  # calls an optimizer's `.step()`
    names: set[str]  # the names it calls

    @property
    def trains(self) -> bool:
        return self.backward or self.step


def _called_names(node: ast.AST, skip: frozenset[int] = frozenset()) -> _Calls:
    """What `node` calls itself (not through other functions): `.backward()`, an optimizer's
    `.step()` (`opt.step()`, `scaler.step(opt)`; not a scheduler's: `opt_scheduler.step()`), and the
    names it calls. The subtrees of the nodes whose `id` is in `skip` are left out."""
    backward = step = False
    names: set[str] = set()
    todo = [node]
    while todo:
        sub = todo.pop()
        if isinstance(sub, ast.Call):
            func = sub.func
            if isinstance(func, ast.Attribute):
                names.add(func.attr)
                if func.attr == "backward":
                    backward = True
                elif func.attr == "step" and _is_optimizer(func.value):
                    step = True
            elif isinstance(func, ast.Name):
                names.add(func.id)
        todo.extend(child for child in ast.iter_child_nodes(sub) if id(child) not in skip)
    return _Calls(backward, step, names)


def _is_optimizer(value: ast.expr) -> bool:
    text = ast.unparse(value)
    return bool(_OPTIMIZER_HINT.search(text)) and not _SCHEDULER_HINT.search(text)


class _Callees:
    """Follows calls to the module's own functions and methods (by name), a few levels deep."""

    def __init__(self, facts: list[Fact]) -> None:
        self.functions: dict[str, list[int]] = {}
        for i, fact in enumerate(facts):
            if isinstance(fact.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(fact.node.name, []).append(i)
        self.facts = facts
        self._calls: dict[int, _Calls] = {}

    def calls(self, index: int) -> _Calls:
        if index not in self._calls:
            self._calls[index] = _called_names(self.facts[index].node)
        return self._calls[index]

    def reaches(self, names: set[str], want, depth: int = 3) -> bool:
        """Does a call to one of `names` reach a function for which `want(index)` holds?"""
        return any(want(index) for index in self.reachable(names, depth))

    def reachable(self, names: set[str], depth: int = 3, through=None) -> set[int]:
        """The functions that calls to `names` reach, `depth` calls deep (each once); calls are
        followed on out of those for which `through(index)` holds (None: all)."""
        found: set[int] = set()
        for _ in range(depth):
            new = {index for name in names for index in self.functions.get(name, ()) if index not in found}
            if not new:
                break
            found |= new
            names = {name for index in new if through is None or through(index) for name in self.calls(index).names}
        return found

    def trains(self, index: int) -> bool:
        """Whether the node calls `.backward()` or an optimizer's `.step()`, itself or through the
        module's own functions."""
        calls = self.calls(index)
        return calls.trains or any(self.calls(j).trains for j in self.reachable(calls.names))

    def steps(self, index: int) -> bool:
        """Whether the node calls an optimizer's `.step()`, itself or through the module's own functions."""
        calls = self.calls(index)
        return calls.step or any(self.calls(j).step for j in self.reachable(calls.names))


def _optimizer_loop(node: ast.For | ast.AsyncFor, callees: _Callees, index: int) -> bool:
    """`for opt in optimizers: opt.step()`: a loop over the optimizers (or their schedulers) inside
    a training step, which steps or zeroes each (several optimizers: a GAN's, per parameter group).
    It is one when its variable is the optimizer of a `.step()`/`.zero_grad()` (or `scaler.step(v)`)
    in its body, and either its iterable is named like a collection of optimizers or schedulers
    (`optimizers`, `self.optimizers()`, `zip(g_opts, schedulers)`), or those calls are all it trains
    with. Not `for i in range(opt.n_iters): ... optimizer.step()`: its variable is not stepped."""
    bound = {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
    uses = other = False
    for stmt in [*node.body, *node.orelse]:
        for sub in ast.walk(stmt):
            if not (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)):
                continue
            attr, value = sub.func.attr, sub.func.value
            if attr in ("step", "zero_grad") and isinstance(value, ast.Name) and value.id in bound:
                uses = True
            elif attr == "step" and any(isinstance(a, ast.Name) and a.id in bound for a in sub.args):
                uses = True  # scaler.step(opt)
            elif attr == "backward" or (attr == "step" and _is_optimizer(value)):
                other = True
    if not uses:
        return False
    words: set[str] = set()
    for sub in ast.walk(node.iter):
        word = sub.id if isinstance(sub, ast.Name) else sub.attr if isinstance(sub, ast.Attribute) else None
        if word:
            words.update(word.lower().split("_"))
    if words & _OPTIMIZER_COLLECTIONS:
        return True
    names = callees.calls(index).names
    return not other and not callees.reaches(names, lambda j: callees.calls(j).trains)


def _inside_step(facts: list[Fact], index: int) -> bool:
    parent = facts[index].parent_loop
    while parent is not None:
        if facts[parent].loop_kind == "step":
            return True
        parent = facts[parent].parent_loop
    return False


def _classify_loops(facts: list[Fact], lines: list[str], epoch_callees: frozenset[str] = frozenset()) -> None:
    """The step loop is the innermost loop that trains: calls `.backward()` or an optimizer's
    `.step()`, itself or through the module's own functions (docs/instrument.md, "Epoch and step
    loops"). Not a step loop, though it trains:
    - a loop over the optimizers (`for opt in optimizers: opt.step()`, `_optimizer_loop`);
    - a loop without an optimizer step inside one that has it (micro-batches of gradient
      accumulation: `for x in loader: for m in x.chunk(4): f(m).backward(); opt.step()`), also in a
      function that the stepping loop calls;
    - a loop inside one whose own body (its training loops left out) calls both `.backward()` and an
      optimizer's `.step()` (a GAN's critic iterations, a meta-learning inner loop);
    - a loop inside a loop marked `# scaleprobe: step` (or in a function such a loop calls).
    A `while` loop can be the step loop too (its iterations ticked: runtime/series.py), and so can
    an `async for` loop (the kind, with per-iteration marks only: `facts.loop_warnings`), so the
    `for` around it is not. The loop around the step loop, or a loop
    calling a function that holds a step loop, is an epoch loop."""
    callees = _Callees(facts)
    candidates: set[int] = set()
    for i, fact in enumerate(facts):
        if not isinstance(fact.node, _LOOP_TYPES):
            continue
        if fact.marker == "step":
            candidates.add(i)
        elif callees.trains(i) and not (
            isinstance(fact.node, (ast.For, ast.AsyncFor)) and _optimizer_loop(fact.node, callees, i)
        ):
            candidates.add(i)

    def inside(i: int) -> range:
        return range(i + 1, i + 1 + facts[i].size)

    def holds(j: int, found: set[int]) -> bool:
        return any(k in found for k in inside(j))

    own: dict[int, tuple[bool, bool]] = {}

    def own_calls(a: int) -> tuple[bool, bool]:
        """Whether loop `a`'s own body, its nested training loops left out, calls `.backward()`, and
        whether it calls an optimizer's `.step()` (itself or through functions holding no training loop)."""
        if a not in own:
            nested = frozenset(id(facts[k].node) for k in inside(a) if k in candidates)
            calls = _called_names(facts[a].node, nested) if nested else callees.calls(a)
            plain = lambda j: not holds(j, candidates)  # noqa: E731
            reached = [callees.calls(j) for j in callees.reachable(calls.names, through=plain) if plain(j)]
            own[a] = (calls.backward or any(c.backward for c in reached), calls.step or any(c.step for c in reached))
        return own[a]

    def takes_in(a: int, steps: bool) -> bool:
        """Whether candidate `a` makes a training loop inside it (or in a function it calls) part
        of its own step: one that steps no optimizer (`steps` False) where `a` itself does, or any,
        where `a` itself both calls `.backward()` and steps an optimizer."""
        backward, step = own_calls(a)
        return step and (backward or not steps)

    reached: dict[int, set[int]] = {}

    def reach(a: int) -> set[int]:
        if a not in reached:
            reached[a] = callees.reachable(callees.calls(a).names)
        return reached[a]

    function_of: dict[int, int] = {}
    for i, _, around in _with_functions(facts):
        if i in candidates and around:
            function_of[i] = around[-1]
    demoted: set[int] = set()
    outer: dict[bool, list[int]] = {}  # steps -> the loops that would take a loop in (below)
    for c in sorted(candidates):
        if facts[c].marker == "step":
            continue
        steps = callees.steps(c)
        parent = facts[c].parent_loop
        while parent is not None:
            marker = facts[parent].marker
            if marker == "step" or (marker != "epoch" and parent in candidates and takes_in(parent, steps)):
                demoted.add(c)
                break
            parent = facts[parent].parent_loop
        if c in demoted or c not in function_of:
            continue
        # the same, across a call: `for x in loader: accumulate(x); opt.step()`
        if steps not in outer:
            outer[steps] = [a for a in sorted(candidates) if facts[a].marker == "step" or (
                facts[a].marker != "epoch" and takes_in(a, steps))]
        function = function_of[c]
        if any(function in reach(a) for a in outer[steps] if a not in inside(function)):
            demoted.add(c)
    for i in candidates - demoted:
        facts[i].step_candidate = True
        parent = facts[i].parent_loop
        while parent is not None:
            facts[parent].candidate_below = True
            parent = facts[parent].parent_loop

    def holds_candidate(j: int) -> bool:
        return any(facts[k].step_candidate for k in inside(j))

    for i, fact in enumerate(facts):
        if fact.step_candidate and not fact.candidate_below:
            # a loop that calls into a function with a training loop of its own is not the step loop
            if any(holds_candidate(j) for j in callees.reachable(callees.calls(i).names)):
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
                called = callees.calls(i).names
                if owner_of_step and callees.reaches(called, lambda j: j in owner_of_step, depth=2):
                    fact.loop_kind = "epoch"
                elif called & epoch_callees and not _inside_step(facts, i):
                    external.append(i)
        for i in external:
            if not any(i < j <= i + facts[i].size for j in external):  # `for rep in ...: for epoch in ...:`
                facts[i].loop_kind = "epoch"
    for fact in facts:
        if fact.marker in ("epoch", "step") and isinstance(fact.node, _LOOP_TYPES):
            fact.loop_kind = fact.marker


def loop_warnings(module: ModuleFacts, relpath: str) -> list[str]:
    """"relpath:line: why" for each step loop that gets no step records: an `async for` loop (found,
    or marked `# scaleprobe: step`) is counted per iteration, never iterated through
    `__sp_iterate__` (its `__anext__` awaits), so the run has no step records (no step_time) from
    it. (A `while` loop's iterations are ticked, and recorded: review 67.)"""
    warnings = []
    for fact in module.facts:
        if fact.loop_kind != "step" or not isinstance(fact.node, ast.AsyncFor):
            continue
        how = "marked `# scaleprobe: step`" if fact.marker == "step" else "found as the step loop (it trains)"
        warnings.append(
            f"{relpath}:{fact.line}: `async for` loop {how}: only a `for` or `while` loop's iterations are "
            "recorded as steps, so it is counted per iteration but gives no step records (no step_time)"
        )
    return warnings
