/* A frameless awaitable for the `async for` / `async with` wrappers of runtime/probe.py.
 *
 * `around(step, g, rids)` is what the wrappers' __anext__/__aenter__/__aexit__ return once they
 * have left the regions `rids` (module globals `g`) and obtained the awaitable `step`. Awaiting it
 * awaits `step`, delegating send/throw/close exactly as `await` (`yield from`) does, and re-enters
 * the regions once, when `step` is done: it returned, raised, or was closed (also when the
 * coroutine awaiting us is closed or freed while suspended inside). It is the C form of
 *
 *     try:
 *         return await step
 *     finally:
 *         _resume(g, rids)
 *
 * in a Python coroutine, without that coroutine's frame: a C call pushes no Python frame, so the
 * awaited coroutine (an `async def __anext__`, an async generator's step) has the user's coroutine
 * as its caller (`f_back`), as without probes: warnings' stacklevel, sys._getframe(1),
 * inspect.stack() and tracebacks see the user's `async for` / `async with` line.
 *
 * Public API of CPython 3.10 to 3.13 only (PyIter_Send and am_send are 3.10+).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *str_on;        /* "__sp_on__" */
static PyObject *str_enter;     /* "__sp_enter__" */
static PyObject *str_close;
static PyObject *str_throw;
static PyObject *str_cr_await;

typedef struct {
    PyObject_HEAD
    PyObject *inner;   /* the iterator `await step` drives; NULL once done */
    PyObject *g;       /* the module's globals */
    PyObject *rids;    /* tuple: the regions, innermost first */
    char done;         /* the regions were re-entered (or that is under way) */
    char running;      /* inside a call into `inner` */
} Around;

static PyTypeObject Around_Type;

/* _resume(g, rids) of runtime/probe.py: `if g.get("__sp_on__"):` enter each region of `rids`,
 * outermost first, with the `__sp_enter__` found in `g` now. */
static int resume_regions(PyObject *g, PyObject *rids) {
    PyObject *on = PyDict_GetItemWithError(g, str_on);
    if (on == NULL) return PyErr_Occurred() ? -1 : 0;
    Py_INCREF(on);
    int truth = PyObject_IsTrue(on);
    Py_DECREF(on);
    if (truth <= 0) return truth;
    PyObject *enter = PyDict_GetItemWithError(g, str_enter);
    if (enter == NULL) {
        if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, str_enter);
        return -1;
    }
    Py_INCREF(enter);
    for (Py_ssize_t i = PyTuple_GET_SIZE(rids) - 1; i >= 0; i--) {
        PyObject *r = PyObject_CallOneArg(enter, PyTuple_GET_ITEM(rids, i));
        if (r == NULL) {
            Py_DECREF(enter);
            return -1;
        }
        Py_DECREF(r);
    }
    Py_DECREF(enter);
    return 0;
}

/* The `finally:` of the Python form, run once: re-enter the regions, then drop `inner`. An
 * exception pending on entry stays pending; one that resuming raises replaces it, with it as its
 * __context__ (as an exception raised in a `finally:` block). Returns -1 when an exception is
 * pending on return. */
static int finish(Around *self) {
    PyObject *et, *ev, *etb;
    PyErr_Fetch(&et, &ev, &etb);
    int rc = 0;
    if (!self->done) {
        self->done = 1;
        rc = resume_regions(self->g, self->rids);
    }
    if (rc < 0 && et != NULL) {
        PyObject *nt, *nv, *ntb;
        PyErr_Fetch(&nt, &nv, &ntb);
        PyErr_NormalizeException(&et, &ev, &etb);
        if (etb != NULL) PyException_SetTraceback(ev, etb);
        PyErr_NormalizeException(&nt, &nv, &ntb);
        if (ntb != NULL) PyException_SetTraceback(nv, ntb);
        if (nv != ev) {
            PyObject *ctx = PyException_GetContext(nv);
            if (ctx == NULL) {
                Py_INCREF(ev);
                PyException_SetContext(nv, ev);  /* steals */
            }
            Py_XDECREF(ctx);
        }
        Py_DECREF(et);
        Py_XDECREF(ev);
        Py_XDECREF(etb);
        et = nt, ev = nv, etb = ntb;
    } else if (rc < 0) {
        PyErr_Fetch(&et, &ev, &etb);
    }
    PyObject *inner = self->inner;
    self->inner = NULL;
    Py_XDECREF(inner);  /* may run code (a finalizer): the exception is held aside meanwhile */
    if (et != NULL) {
        PyErr_Restore(et, ev, etb);
        return -1;
    }
    return 0;
}

/* gen_close_iter of CPython: close the delegate, when it has a close(). */
static int close_iter(PyObject *yf) {
    PyObject *meth = PyObject_GetAttr(yf, str_close);
    if (meth == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) PyErr_WriteUnraisable(yf);
        PyErr_Clear();
        return 0;
    }
    PyObject *r = PyObject_CallNoArgs(meth);
    Py_DECREF(meth);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* The throw() arguments raised as given, checked as generator.throw() checks them (the part of
 * CPython's _gen_throw after `throw_here`). Always returns -1. */
static int raise_given(PyObject *typ, PyObject *val, PyObject *tb) {
    if (tb == Py_None) tb = NULL;
    else if (tb != NULL && !PyTraceBack_Check(tb)) {
        PyErr_SetString(PyExc_TypeError, "throw() third argument must be a traceback object");
        return -1;
    }
    Py_INCREF(typ);
    Py_XINCREF(val);
    Py_XINCREF(tb);
    if (PyExceptionClass_Check(typ)) {
        PyErr_NormalizeException(&typ, &val, &tb);
    } else if (PyExceptionInstance_Check(typ)) {
        if (val && val != Py_None) {
            PyErr_SetString(PyExc_TypeError, "instance exception may not have a separate value");
            goto failed;
        }
        Py_XSETREF(val, typ);
        typ = (PyObject *)Py_TYPE(val);
        Py_INCREF(typ);
        if (tb == NULL) tb = PyException_GetTraceback(val);
    } else {
        PyErr_Format(PyExc_TypeError, "exceptions must be classes or instances deriving from BaseException, not %s",
                     Py_TYPE(typ)->tp_name);
        goto failed;
    }
    PyErr_Restore(typ, val, tb);
    return -1;
failed:
    Py_DECREF(typ);
    Py_XDECREF(val);
    Py_XDECREF(tb);
    return -1;
}

static int not_running(Around *self) {
    if (self->running) {
        PyErr_SetString(PyExc_ValueError, "coroutine already executing");
        return 0;
    }
    return 1;
}

static PySendResult around_am_send(Around *self, PyObject *arg, PyObject **result) {
    *result = NULL;
    if (self->inner == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "cannot reuse already awaited coroutine");
        return PYGEN_ERROR;
    }
    if (!not_running(self)) return PYGEN_ERROR;
    PyObject *inner = self->inner, *res = NULL;
    Py_INCREF(inner);
    self->running = 1;
    PySendResult r = PyIter_Send(inner, arg, &res);
    self->running = 0;
    Py_DECREF(inner);
    if (r == PYGEN_NEXT) {
        *result = res;
        return r;
    }
    if (finish(self) < 0) {  /* (with an error of the inner's pending, that one: finish keeps it) */
        Py_XDECREF(res);
        return PYGEN_ERROR;
    }
    *result = res;
    return r;
}

/* StopIteration(value), as a generator returning `value` raises it (a tuple or an exception is the
 * one argument, not the arguments or the exception). */
static void set_stop_iteration(PyObject *value) {
    if (PyTuple_Check(value) || PyExceptionInstance_Check(value)) {
        PyObject *e = PyObject_CallOneArg(PyExc_StopIteration, value);
        if (e != NULL) {
            PyErr_SetObject(PyExc_StopIteration, e);
            Py_DECREF(e);
        }
    } else {
        PyErr_SetObject(PyExc_StopIteration, value);
    }
}

static PyObject *around_iternext(Around *self) {
    PyObject *res;
    PySendResult r = around_am_send(self, Py_None, &res);
    if (r == PYGEN_RETURN) {
        if (res != Py_None) set_stop_iteration(res);
        Py_DECREF(res);
        return NULL;
    }
    return res;
}

static PyObject *around_send(Around *self, PyObject *arg) {
    PyObject *res;
    PySendResult r = around_am_send(self, arg, &res);
    if (r == PYGEN_RETURN) {
        set_stop_iteration(res);
        Py_DECREF(res);
        return NULL;
    }
    return res;
}

static PyObject *around_throw(Around *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1 || nargs > 3) {
        PyErr_Format(PyExc_TypeError, nargs < 1 ? "throw expected at least 1 argument, got %zd"
                                                : "throw expected at most 3 arguments, got %zd", nargs);
        return NULL;
    }
    PyObject *typ = args[0], *val = nargs > 1 ? args[1] : NULL, *tb = nargs > 2 ? args[2] : NULL;
    if (self->inner == NULL) {  /* a finished coroutine says so */
        PyErr_SetString(PyExc_RuntimeError, "cannot reuse already awaited coroutine");
        return NULL;
    }
    if (!not_running(self)) return NULL;
    PyObject *inner = self->inner;
    Py_INCREF(inner);
    if (PyErr_GivenExceptionMatches(typ, PyExc_GeneratorExit)) {
        /* a coroutine closes its delegate, then raises GeneratorExit at its await */
        self->running = 1;
        int err = close_iter(inner);
        self->running = 0;
        Py_DECREF(inner);
        if (err == 0) raise_given(typ, val, tb);
        finish(self);
        return NULL;
    }
    PyObject *meth = PyObject_GetAttr(inner, str_throw);
    if (meth == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {  /* the lookup failed: the await stays */
            Py_DECREF(inner);
            return NULL;
        }
        PyErr_Clear();
        Py_DECREF(inner);
        raise_given(typ, val, tb);  /* no throw(): raised at the await */
        finish(self);
        return NULL;
    }
    PyObject *fwd[3] = {typ, val, tb};
    Py_ssize_t n = nargs;
    PyObject *norm = NULL;
#if PY_VERSION_HEX >= 0x030C0000
    /* 3.12+ warns of throw(type, value, tb): the caller's throw() has warned already, so a
     * generator or coroutine gets the one exception it stands for (as CPython passes it on) */
    if (nargs > 1 && (PyGen_CheckExact(inner) || PyCoro_CheckExact(inner))) {
        if (raise_given(typ, val, tb) < 0 && !PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyObject *t, *v, *b;
            PyErr_Fetch(&t, &v, &b);
            PyErr_NormalizeException(&t, &v, &b);
            if (v != NULL && PyExceptionInstance_Check(v) &&
                    (v == typ || (PyExceptionClass_Check(typ) && PyObject_TypeCheck(v, (PyTypeObject *)typ)))) {
                if (b != NULL) PyException_SetTraceback(v, b);
                norm = v, v = NULL;
                fwd[0] = norm, n = 1;
            }
            Py_XDECREF(t);
            Py_XDECREF(v);
            Py_XDECREF(b);
        }
        PyErr_Clear();
    }
#endif
    self->running = 1;
    PyObject *ret = PyObject_Vectorcall(meth, fwd, (size_t)n, NULL);
    self->running = 0;
    Py_XDECREF(norm);
    Py_DECREF(meth);
    Py_DECREF(inner);
    if (ret != NULL) return ret;  /* the delegate yielded: still awaiting */
    finish(self);  /* it returned (StopIteration: our value) or raised */
    return NULL;
}

static PyObject *around_close(Around *self, PyObject *Py_UNUSED(ignored)) {
    if (self->inner == NULL) Py_RETURN_NONE;
    if (!not_running(self)) return NULL;
    PyObject *inner = self->inner;
    Py_INCREF(inner);
    self->running = 1;
    int err = close_iter(inner);
    self->running = 0;
    Py_DECREF(inner);
    if (err == 0) PyErr_SetNone(PyExc_GeneratorExit);  /* raised at the await */
    finish(self);
    if (PyErr_ExceptionMatches(PyExc_GeneratorExit) || PyErr_ExceptionMatches(PyExc_StopIteration)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return NULL;
}

static PyObject *around_await(Around *self) {
    Py_INCREF(self);
    return (PyObject *)self;
}

/* Freed while awaiting (never closed by an awaiting coroutine): closed, as a coroutine is. */
static void around_finalize(Around *self) {
    if (self->inner == NULL && self->done) return;
    PyObject *et, *ev, *etb;
    PyErr_Fetch(&et, &ev, &etb);
    PyObject *r;
    if (self->inner != NULL) {
        r = around_close(self, NULL);
    } else {
        r = finish(self) < 0 ? NULL : Py_NewRef(Py_None);
    }
    if (r == NULL) PyErr_WriteUnraisable((PyObject *)self);
    else Py_DECREF(r);
    PyErr_Restore(et, ev, etb);
}

static int around_traverse(Around *self, visitproc visit, void *arg) {
    Py_VISIT(self->inner);
    Py_VISIT(self->g);
    Py_VISIT(self->rids);
    return 0;
}

static int around_clear(Around *self) {
    Py_CLEAR(self->inner);
    Py_CLEAR(self->g);
    Py_CLEAR(self->rids);
    return 0;
}

static void around_dealloc(Around *self) {
    if (PyObject_CallFinalizerFromDealloc((PyObject *)self) < 0) return;  /* resurrected */
    PyObject_GC_UnTrack(self);
    around_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* What `await step` iterates, as the interpreter gets it (_PyCoro_GetAwaitableIter and
 * GET_AWAITABLE's check); the caller checked that `step` is awaitable (a generator reaching here
 * is one marked by types.coroutine). */
static PyObject *awaitable_iter(PyObject *step) {
    if (PyCoro_CheckExact(step)) {
        PyObject *yf = PyObject_GetAttr(step, str_cr_await);
        if (yf == NULL) return NULL;
        int busy = yf != Py_None;
        Py_DECREF(yf);
        if (busy) {
            PyErr_SetString(PyExc_RuntimeError, "coroutine is being awaited already");
            return NULL;
        }
        return Py_NewRef(step);
    }
    if (PyGen_CheckExact(step)) return Py_NewRef(step);
    PyTypeObject *t = Py_TYPE(step);
    if (t->tp_as_async == NULL || t->tp_as_async->am_await == NULL) {
        PyErr_Format(PyExc_TypeError, "object %.100s can't be used in 'await' expression", t->tp_name);
        return NULL;
    }
    PyObject *res = t->tp_as_async->am_await(step);
    if (res == NULL) return NULL;
    int coro = PyCoro_CheckExact(res);
    if (!coro && PyGen_CheckExact(res)) {  /* a generator of types.coroutine is a coroutine here */
        PyObject *code = PyObject_GetAttrString(res, "gi_code");
        PyObject *flags = code ? PyObject_GetAttrString(code, "co_flags") : NULL;
        Py_XDECREF(code);
        if (flags == NULL) {
            Py_DECREF(res);
            return NULL;
        }
        long f = PyLong_AsLong(flags);
        Py_DECREF(flags);
        coro = f != -1 && (f & CO_ITERABLE_COROUTINE);
    }
    if (coro) {
        PyErr_SetString(PyExc_TypeError, "__await__() returned a coroutine");
        Py_DECREF(res);
        return NULL;
    }
    if (!PyIter_Check(res)) {
        PyErr_Format(PyExc_TypeError, "__await__() returned non-iterator of type '%.100s'", Py_TYPE(res)->tp_name);
        Py_DECREF(res);
        return NULL;
    }
    return res;
}

static PyObject *around(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "around() takes 3 arguments (step, g, rids), %zd given", nargs);
        return NULL;
    }
    PyObject *step = args[0], *g = args[1], *rids = args[2];
    if (!PyDict_Check(g)) {
        PyErr_SetString(PyExc_TypeError, "around(): g must be a dict");
        return NULL;
    }
    PyObject *inner = awaitable_iter(step);
    if (inner == NULL) return NULL;
    PyObject *ids = PyTuple_Check(rids) ? Py_NewRef(rids) : PySequence_Tuple(rids);
    if (ids == NULL) {
        Py_DECREF(inner);
        return NULL;
    }
    Around *self = PyObject_GC_New(Around, &Around_Type);
    if (self == NULL) {
        Py_DECREF(inner);
        Py_DECREF(ids);
        return NULL;
    }
    self->inner = inner;
    self->g = Py_NewRef(g);
    self->rids = ids;
    self->done = 0;
    self->running = 0;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static PyMethodDef around_methods[] = {
    {"send", (PyCFunction)around_send, METH_O, "send(value): on to the awaited object."},
    {"throw", (PyCFunction)(void (*)(void))around_throw, METH_FASTCALL,
     "throw(exc): into the awaited object, as `await` passes it on."},
    {"close", (PyCFunction)around_close, METH_NOARGS, "close(): close the awaited object, then re-enter the regions."},
    {NULL, NULL, 0, NULL},
};

static PyAsyncMethods around_as_async = {
    .am_await = (unaryfunc)around_await,
    .am_send = (sendfunc)around_am_send,
};

static PyTypeObject Around_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "runtime._asyncwrap.Around",
    .tp_basicsize = sizeof(Around),
    .tp_dealloc = (destructor)around_dealloc,
    .tp_as_async = &around_as_async,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "An awaited step of `async for`/`async with`, the regions left until it is done.",
    .tp_traverse = (traverseproc)around_traverse,
    .tp_clear = (inquiry)around_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)around_iternext,
    .tp_methods = around_methods,
    .tp_finalize = (destructor)around_finalize,
};

/* The type's tp_name, as the interpreter's messages name a type (`%.100s` of it): a class's
 * __name__, a C type's with its module (`collections.deque`), which Python code cannot tell apart
 * for a type made from a spec (review 107 MED-1: `'async for' received an invalid object from
 * __anext__: ...`). */
static PyObject *tp_name(PyObject *Py_UNUSED(module), PyObject *kind) {
    if (!PyType_Check(kind)) {
        PyErr_Format(PyExc_TypeError, "tp_name() argument must be a type, not %.100s", Py_TYPE(kind)->tp_name);
        return NULL;
    }
    const char *name = ((PyTypeObject *)kind)->tp_name;
    return PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name), "replace");
}

static PyMethodDef module_methods[] = {
    {"around", (PyCFunction)(void (*)(void))around, METH_FASTCALL,
     "around(step, g, rids): await `step`, then re-enter the regions `rids` (globals `g`) once."},
    {"tp_name", (PyCFunction)tp_name, METH_O, "tp_name(type): the type's name as the interpreter's messages print it."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "runtime._asyncwrap",
    "A frameless awaitable for the async for / async with wrappers (runtime/probe.py).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__asyncwrap(void) {
    if (PyType_Ready(&Around_Type) < 0) return NULL;
    str_on = PyUnicode_InternFromString("__sp_on__");
    str_enter = PyUnicode_InternFromString("__sp_enter__");
    str_close = PyUnicode_InternFromString("close");
    str_throw = PyUnicode_InternFromString("throw");
    str_cr_await = PyUnicode_InternFromString("cr_await");
    if (!str_on || !str_enter || !str_close || !str_throw || !str_cr_await) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    Py_INCREF(&Around_Type);
    if (PyModule_AddObject(m, "Around", (PyObject *)&Around_Type) < 0) {
        Py_DECREF(&Around_Type);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
