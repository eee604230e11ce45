"""Runs every case of pkg.cases and prints one JSON object, for original-versus-instrumented runs."""
import asyncio
import inspect
import json
import multiprocessing
import pickle
import weakref

from pkg import cases as c


def describe(obj):
    return {
        "doc": obj.__doc__,
        "sig": str(inspect.signature(obj)) if callable(obj) else None,
        "gen": inspect.isgeneratorfunction(obj),
        "coro": inspect.iscoroutinefunction(obj),
        "agen": inspect.isasyncgenfunction(obj),
        "name": getattr(obj, "__qualname__", None),
    }


def outcome(fn, *args, **kwargs):
    try:
        return ["ok", repr(fn(*args, **kwargs))]
    except Exception as exc:
        return ["raised", type(exc).__name__, str(exc)]


def main():
    out = {}
    for name in ("plain", "uses_locals", "gen", "coro", "agen", "wrapped", "over", "stub", "delegating"):
        out[f"describe.{name}"] = describe(getattr(c, name))
    out["describe.Child.who"] = describe(c.Child.who)
    out["module_doc"] = c.__doc__
    out["class_doc"] = c.Child.__doc__
    out["class_dict"] = sorted(k for k in vars(c.Child) if not k.startswith("__") or k == "__doc__")
    out["enum_members"] = [m.name for m in c.Color]
    out["enum_describe"] = c.Color.RED.describe()
    out["plain"] = outcome(c.plain, 1, c=3, e=5)
    out["locals"] = outcome(c.uses_locals, 2)
    out["global"] = [c.uses_global(), c.uses_global()]
    out["closure"] = outcome(c.closure)
    base = c.recursive_depth(0)
    out["recursion_delta"] = c.recursive_depth(5) - base
    out["raises_value"] = outcome(c.raises, "value")
    out["raises_zero"] = outcome(c.raises, "zero")
    out["loops"] = [c.loops(n) for n in (0, 3, 5, 20)]
    out["loop_else"] = c.loop_else_no_break()
    g = c.gen(3)
    out["gen"] = [next(g), g.send("x"), next(g), next(g)]
    try:
        next(g)
    except StopIteration as stop:
        out["gen_return"] = stop.value
    g2 = c.gen_expr_yield()
    out["gen_expr"] = [next(g2), g2.send(None)]
    try:
        g2.send("b")
    except StopIteration as stop:
        out["gen_expr_return"] = stop.value
    out["delegating"] = list(c.delegating())
    out["coro"] = asyncio.run(c.coro(3))

    async def collect():
        return [i async for i in c.agen(3)]

    out["agen"] = asyncio.run(collect())
    out["async_for_and_with"] = asyncio.run(c.async_for_and_with())
    child = c.Child()
    out["methods"] = [child.who(), c.Child.static(1), c.Child.klass(), child.prop, child.call_private()]
    out["wrapped"] = [c.wrapped(5, 2), c.wrapped.__doc__, c.wrapped.__wrapped__.__name__]
    out["lambda_comp"] = repr(c.lambda_and_comprehension())
    out["train_like"] = c.train_like([1, 2], 2)
    out["pickle"] = pickle.loads(pickle.dumps(c.Holder(3))) == c.Holder(3)
    out["pickle_func"] = pickle.loads(pickle.dumps(c.picklable_target))(2)

    class Item:
        pass

    def lifetime():
        item = Item()
        ref = weakref.ref(item)
        gen_items = iter([item])
        for _ in c.train_like(gen_items, 1):
            pass
        del item, gen_items
        return ref() is None

    out["no_reference_kept"] = lifetime()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        out["spawn"] = pool.map(c.picklable_target, [1, 2])
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
