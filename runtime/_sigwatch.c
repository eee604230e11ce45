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

static PyObject *w_watch(PyObject *self, PyObject *arg) {
    int sig = signal_arg(arg);
    if (sig < 0) return NULL;
    struct sigaction current;
    if (sigaction(sig, NULL, &current) != 0) return PyErr_SetFromErrno(PyExc_OSError);
    if (is_ours(&current)) Py_RETURN_TRUE;
    if ((current.sa_flags & SA_SIGINFO) || cpython_handler == NULL || current.sa_handler != cpython_handler)
        Py_RETURN_FALSE; /* not CPython's handler (SIG_DFL, SIG_IGN, the program's own C handler) */
    struct sigaction ours = current;
    ours.sa_flags |= SA_SIGINFO;
    ours.sa_sigaction = counting_handler;
    previous[sig] = current;
    if (sigaction(sig, &ours, NULL) != 0) return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_TRUE;
}

static PyObject *w_remember(PyObject *self, PyObject *arg) {
    int sig = signal_arg(arg);
    if (sig < 0) return NULL;
    struct sigaction current;
    if (sigaction(sig, NULL, &current) != 0) Py_RETURN_FALSE;
    if ((current.sa_flags & SA_SIGINFO) || current.sa_handler == SIG_DFL || current.sa_handler == SIG_IGN)
        Py_RETURN_FALSE;
    cpython_handler = current.sa_handler;
    Py_RETURN_TRUE;
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

static PyMethodDef methods[] = {
    {"remember", w_remember, METH_O,
     "remember(sig): right after signal.signal(sig, <Python function>): the C handler now installed is CPython's."},
    {"watch", w_watch, METH_O, "watch(sig): count sig's arrivals ahead of CPython's handler; False if that is not installed."},
    {"arrivals", w_arrivals, METH_O, "arrivals(sig): how many times sig arrived in this process since watch()."},
    {"watching", w_watching, METH_O, "watching(sig): whether the counting handler is still the one installed."},
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
