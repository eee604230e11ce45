/* The collector pause of runtime/gc_pause.py, in C (review 56 F2).
 *
 * A Python signal handler runs between two bytecodes of the main thread, so a KeyboardInterrupt
 * that the program catches could land inside the Python form of pause()/resume() (or between a
 * caller's pause() and its `try:`): the count stayed up and the collector was off for the rest of
 * the run, or the lock stayed held and the flush thread blocked for good. A C function runs no
 * Python code (no handler, no finalizer: it allocates nothing), and the GIL makes it atomic
 * against the other threads: no lock is needed. The callers call pause() inside their `try:`
 * (an interpreter checks for a pending signal after a C call returns, not before it starts).
 *
 * The state: `depth`, the pauses held (all threads); `program_on`, while one is held, whether the
 * program has the collector on (its gc.enable/gc.disable set it, gc.isenabled reads it: they are
 * replaced by enable/disable/isenabled below). Public API of CPython 3.10 to 3.13 only
 * (PyGC_Enable/PyGC_Disable/PyGC_IsEnabled are 3.10+).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static long depth = 0;
static int program_on = 0;

static PyObject *p_pause(PyObject *self, PyObject *unused) {
    if (depth++ == 0) program_on = PyGC_Disable();
    Py_RETURN_NONE;
}

static PyObject *p_resume(PyObject *self, PyObject *unused) {
    if (depth > 0 && --depth == 0 && program_on) PyGC_Enable();
    Py_RETURN_NONE;
}

static PyObject *p_enable(PyObject *self, PyObject *unused) {
    if (depth) program_on = 1;
    else PyGC_Enable();
    Py_RETURN_NONE;
}

static PyObject *p_disable(PyObject *self, PyObject *unused) {
    if (depth) program_on = 0;
    else PyGC_Disable();
    Py_RETURN_NONE;
}

static PyObject *p_isenabled(PyObject *self, PyObject *unused) {
    return PyBool_FromLong(depth ? program_on : PyGC_IsEnabled());
}

/* In a forked child: a pause held by a thread the child does not have ends. */
static PyObject *p_after_fork(PyObject *self, PyObject *unused) {
    if (depth) {
        depth = 0;
        if (program_on) PyGC_Enable();
    }
    Py_RETURN_NONE;
}

static PyObject *p_depth(PyObject *self, PyObject *unused) { return PyLong_FromLong(depth); }

static PyMethodDef methods[] = {
    {"pause", p_pause, METH_NOARGS, "Switch the collector off until the matching resume() (pauses nest)."},
    {"resume", p_resume, METH_NOARGS, "End a pause; the last one out puts the program's switch back."},
    {"enable", p_enable, METH_NOARGS, "Enable automatic garbage collection."},
    {"disable", p_disable, METH_NOARGS, "Disable automatic garbage collection."},
    {"isenabled", p_isenabled, METH_NOARGS, "Returns true if automatic garbage collection is enabled."},
    {"after_fork", p_after_fork, METH_NOARGS, "In a forked child: end the pauses of threads it does not have."},
    {"depth", p_depth, METH_NOARGS, "The pauses held (for tests)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_gcpause", NULL, -1, methods};

PyMODINIT_FUNC PyInit__gcpause(void) { return PyModule_Create(&module); }
