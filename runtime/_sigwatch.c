/* Count the arrivals of a signal at the C level, ahead of Python's own handler (runtime/signal_watch.py).
 *
 * A Python signal handler runs in the main thread at its next bytecode boundary, or when a blocking
 * call returns EINTR. A signal that arrives just before the main thread blocks (in glibc's sem_wait
 * loop under a multiprocessing lock) is taken by CPython's C handler and never reaches Python. To
 * see that from another thread, watch(sig) puts a C handler in front of the one installed (CPython's):
 * it counts the arrival and calls it. The counts are per process: a fork resets them in the child
 * (pthread_atfork), so that a child's signal is never counted in its parent.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <signal.h>
#include <pthread.h>

#ifndef NSIG
#define NSIG 65
#endif

static volatile sig_atomic_t arrivals[NSIG];
static struct sigaction previous[NSIG];
/* CPython's own C handler, seen right after a Python handler was installed (remember): watch()
 * goes in front of it only, never in front of a C handler of the program's (ctypes, extensions). */
static void (*cpython_handler)(int) = NULL;

static void counting_handler(int sig, siginfo_t *info, void *ctx) {
    if (sig <= 0 || sig >= NSIG) return;
    arrivals[sig] += 1;
    struct sigaction *p = &previous[sig];
    if (p->sa_flags & SA_SIGINFO) {
        if (p->sa_sigaction) p->sa_sigaction(sig, info, ctx);
    } else if (p->sa_handler != SIG_DFL && p->sa_handler != SIG_IGN && p->sa_handler) {
        p->sa_handler(sig);
    }
}

static int is_ours(const struct sigaction *a) {
    return (a->sa_flags & SA_SIGINFO) && a->sa_sigaction == counting_handler;
}

static void reset_in_child(void) {
    for (int i = 0; i < NSIG; i++) arrivals[i] = 0;
}

/* The signal number argument: 1 to NSIG-1, else -1 with a ValueError set. */
static int signal_arg(PyObject *arg) {
    long sig = PyLong_AsLong(arg);
    if (sig == -1 && PyErr_Occurred()) return -1;
    if (sig <= 0 || sig >= NSIG) {
        PyErr_Format(PyExc_ValueError, "signal number out of range: %ld", sig);
        return -1;
    }
    return (int)sig;
}

/* Put the counting handler in front of CPython's: 1, or 0 where the handler installed is another
 * (SIG_DFL, SIG_IGN, a C handler of the program's), -1 with errno set. */
static int do_watch(int sig) {
    struct sigaction current;
    if (sigaction(sig, NULL, &current) != 0) return -1;
    if (is_ours(&current)) return 1;
    if ((current.sa_flags & SA_SIGINFO) || cpython_handler == NULL || current.sa_handler != cpython_handler)
        return 0;
    struct sigaction ours = current;
    ours.sa_flags |= SA_SIGINFO;
    ours.sa_sigaction = counting_handler;
    previous[sig] = current;
    if (sigaction(sig, &ours, NULL) != 0) return -1;
    return 1;
}

/* Right after signal.signal(sig, <Python function>): the C handler now installed is CPython's. */
static int do_remember(int sig) {
    struct sigaction current;
    if (sigaction(sig, NULL, &current) != 0) return 0;
    if ((current.sa_flags & SA_SIGINFO) || current.sa_handler == SIG_DFL || current.sa_handler == SIG_IGN)
        return 0;
    cpython_handler = current.sa_handler;
    return 1;
}

static PyObject *w_watch(PyObject *self, PyObject *arg) {
    int sig = signal_arg(arg);
    if (sig < 0) return NULL;
    int r = do_watch(sig);
    if (r < 0) return PyErr_SetFromErrno(PyExc_OSError);
    return PyBool_FromLong(r);
}

static PyObject *w_remember(PyObject *self, PyObject *arg) {
    int sig = signal_arg(arg);
    if (sig < 0) return NULL;
    return PyBool_FromLong(do_remember(sig));
}

/* signal.signal as it was before `keep_counting`, and the signals whose counter it puts back. */
static PyObject *original_signal = NULL;
static PyObject *original_getsignal = NULL;
static char keep[NSIG];

/* Handlers of scaleprobe's that the program is shown as another (runtime/signal_disguise.py):
 * getsignal() and signal()'s return value give shown[sig] for ours[sig], and signal(sig, shown[sig])
 * installs ours[sig] again. NULL where none. */
static PyObject *ours[NSIG];
static PyObject *shown[NSIG];

/* The handler argument is what the program is shown for ours[sig]: the same object, or for a
 * shown SIG_DFL (an int) an int equal to it (0, signal.SIG_DFL). Only ints are compared: no user
 * __eq__ runs. */
static int is_shown(long sig, PyObject *handler) {
    if (sig <= 0 || sig >= NSIG || ours[sig] == NULL) return 0;
    PyObject *s = shown[sig];
    if (handler == s) return 1;
    if (PyLong_Check(s) && PyLong_Check(handler)) {
        int eq = PyObject_RichCompareBool(handler, s, Py_EQ);
        if (eq < 0) {
            PyErr_Clear();
            return 0;
        }
        return eq;
    }
    return 0;
}

/* `result` (a new reference) as the program is to see it for `sig`. */
static PyObject *as_shown(long sig, PyObject *result) {
    if (result != NULL && sig > 0 && sig < NSIG && ours[sig] != NULL && result == ours[sig]) {
        Py_DECREF(result);
        Py_INCREF(shown[sig]);
        return shown[sig];
    }
    return result;
}

/* In place of signal.signal (runtime/run_signals.py, runtime/signal_disguise.py): the same call,
 * a disguised handler put back where the program puts back what it was shown for it, and it shown
 * as that in the value returned; then, for a kept signal given a Python handler, the counter back in
 * front of CPython's handler that the call installed. A C function: an error of the call shows no
 * frame of scaleprobe's. */
static PyObject *w_signal(PyObject *self, PyObject *args) {
    if (original_signal == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_sigwatch.signal: keep_counting() was not called");
        return NULL;
    }
    long sig = -1;
    PyObject *handler = NULL;
    if (PyTuple_GET_SIZE(args) == 2) {
        sig = PyLong_AsLong(PyTuple_GET_ITEM(args, 0));
        if (sig == -1 && PyErr_Occurred()) PyErr_Clear(); /* not a number: the call says so */
        handler = PyTuple_GET_ITEM(args, 1);
    }
    PyObject *result;
    /* `handler` is held (a strong reference) until it has been checked below: the call may drop
     * the last other reference to ours[sig] (an old handler's __del__ calling disguise(), a
     * Python original_signal): review 76 LOW-2. */
    if (handler != NULL && is_shown(sig, handler)) {
        /* the program puts back what it was shown for ours (what getsignal gave it): ours again */
        handler = ours[sig];
        Py_INCREF(handler);
        PyObject *again = PyTuple_Pack(2, PyTuple_GET_ITEM(args, 0), handler);
        if (again == NULL) {
            Py_DECREF(handler);
            return NULL;
        }
        result = PyObject_Call(original_signal, again, NULL);
        Py_DECREF(again);
    } else {
        Py_XINCREF(handler);
        result = PyObject_Call(original_signal, args, NULL);
    }
    if (result == NULL || sig <= 0 || sig >= NSIG) {
        Py_XDECREF(handler);
        return result;
    }
    int callable = handler != NULL && PyCallable_Check(handler);
    Py_XDECREF(handler);
    if (keep[sig] && callable) {
        if (do_remember((int)sig)) (void)do_watch((int)sig);
    }
    return as_shown(sig, result);
}

/* In place of signal.getsignal (runtime/signal_disguise.py): the same call, ours shown as the
 * program is to see it. A C function: an error of the call shows no frame of scaleprobe's. */
static PyObject *w_getsignal(PyObject *self, PyObject *arg) {
    if (original_getsignal == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_sigwatch.getsignal: hide() was not called");
        return NULL;
    }
    PyObject *result = PyObject_CallOneArg(original_getsignal, arg);
    if (result == NULL) return NULL;
    long sig = PyLong_AsLong(arg);
    if (sig == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return result;
    }
    return as_shown(sig, result);
}

static PyObject *w_hide(PyObject *self, PyObject *args) {
    PyObject *sig_fn, *get_fn;
    if (!PyArg_ParseTuple(args, "OO", &sig_fn, &get_fn)) return NULL;
    Py_INCREF(sig_fn);
    Py_INCREF(get_fn);
    Py_XSETREF(original_signal, sig_fn);
    Py_XSETREF(original_getsignal, get_fn);
    Py_RETURN_NONE;
}

static PyObject *w_disguise(PyObject *self, PyObject *args) {
    PyObject *handler, *as;
    int sig;
    if (!PyArg_ParseTuple(args, "iOO", &sig, &handler, &as)) return NULL;
    if (sig <= 0 || sig >= NSIG) {
        PyErr_Format(PyExc_ValueError, "signal number out of range: %d", sig);
        return NULL;
    }
    if (handler == Py_None) {
        Py_CLEAR(ours[sig]);
        Py_CLEAR(shown[sig]);
        Py_RETURN_NONE;
    }
    Py_INCREF(handler);
    Py_INCREF(as);
    Py_XSETREF(ours[sig], handler);
    Py_XSETREF(shown[sig], as);
    Py_RETURN_NONE;
}

static PyObject *w_keep_counting(PyObject *self, PyObject *args) {
    PyObject *original;
    int sig;
    if (!PyArg_ParseTuple(args, "Oi", &original, &sig)) return NULL;
    if (sig <= 0 || sig >= NSIG) {
        PyErr_Format(PyExc_ValueError, "signal number out of range: %d", sig);
        return NULL;
    }
    PyObject *old = original_signal;
    Py_INCREF(original);
    original_signal = original;
    Py_XDECREF(old);
    keep[sig] = 1;
    Py_RETURN_NONE;
}

static PyObject *w_arrivals(PyObject *self, PyObject *arg) {
    int sig = signal_arg(arg);
    if (sig < 0) return NULL;
    return PyLong_FromLong((long)arrivals[sig]);
}

static PyObject *w_watching(PyObject *self, PyObject *arg) {
    int sig = signal_arg(arg);
    if (sig < 0) return NULL;
    struct sigaction current;
    if (sigaction(sig, NULL, &current) != 0) Py_RETURN_FALSE;
    return PyBool_FromLong(is_ours(&current));
}

/* Whether sig's disposition is the default action itself: not a C handler that Python does not
 * know of (faulthandler.register(SIGUSR1), an extension's), which getsignal reports as SIG_DFL or None. */
static PyObject *w_at_default(PyObject *self, PyObject *arg) {
    int sig = signal_arg(arg);
    if (sig < 0) return NULL;
    struct sigaction current;
    if (sigaction(sig, NULL, &current) != 0) return PyErr_SetFromErrno(PyExc_OSError);
    return PyBool_FromLong(!(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_DFL);
}

static PyMethodDef methods[] = {
    {"at_default", w_at_default, METH_O, "at_default(sig): whether sig's disposition is SIG_DFL itself."},
    {"remember", w_remember, METH_O,
     "remember(sig): right after signal.signal(sig, <Python function>): the C handler now installed is CPython's."},
    {"watch", w_watch, METH_O, "watch(sig): count sig's arrivals ahead of CPython's handler; False if that is not installed."},
    {"arrivals", w_arrivals, METH_O, "arrivals(sig): how many times sig arrived in this process since watch()."},
    {"watching", w_watching, METH_O, "watching(sig): whether the counting handler is still the one installed."},
    {"signal", w_signal, METH_VARARGS,
     "signal(signalnum, handler, /): signal.signal, then the counter back in front for a kept signal."},
    {"getsignal", w_getsignal, METH_O, "getsignal(signalnum, /): signal.getsignal, a disguised handler shown as the program is to see it."},
    {"hide", w_hide, METH_VARARGS, "hide(original_signal, original_getsignal): what signal() and getsignal() call."},
    {"disguise", w_disguise, METH_VARARGS,
     "disguise(sig, ours, shown): getsignal() and signal() show `ours` as `shown`, and signal(sig, shown) installs ours; "
     "disguise(sig, None, None) ends it."},
    {"keep_counting", w_keep_counting, METH_VARARGS,
     "keep_counting(original_signal, sig): what signal() calls, and that it keeps counting sig."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_sigwatch", "Signal arrivals counted at the C level.",
                                    -1, methods};

PyMODINIT_FUNC PyInit__sigwatch(void) {
    static int registered = 0;
    if (!registered) {
        if (pthread_atfork(NULL, NULL, reset_in_child) != 0) {
            PyErr_SetString(PyExc_OSError, "pthread_atfork failed");
            return NULL;
        }
        registered = 1;
    }
    return PyModule_Create(&moddef);
}
