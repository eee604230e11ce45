/* A stream's `write` that also appends the text to a file (runtime/output_copy.py), with no Python
 * frame of its own: a program that prints at the bottom of its recursion limit prints as it does
 * without the launcher (review 128 LOW-8; the launcher keeps the program's stack depth, see
 * docs/launch.md). Called by vectorcall, which adds no recursion level either.
 *
 *     Tee(write, path, encoding)  calls write(text), then appends text, encoded, to the file at
 *                                 path (bytes), opened at the first text (no empty file: the modeler
 *                                 skips an empty one), with O_APPEND: each call's bytes go in whole;
 *                                 a failed append (a full disk) ends the copy, never the program's write
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <unistd.h>

typedef struct {
    PyObject_HEAD
    PyObject *write;    /* the stream's own write */
    PyObject *encoding; /* str: the stream's encoding */
    PyObject *path;     /* bytes: the file */
    int fd;             /* -1 until the first text */
    int broken;
    vectorcallfunc vectorcall;
} Tee;

static void copy_text(Tee *self, PyObject *text) {
    if (self->broken || !PyUnicode_CheckExact(text) || PyUnicode_GET_LENGTH(text) == 0) {
        return;
    }
    const char *encoding = PyUnicode_AsUTF8(self->encoding);
    PyObject *bytes = encoding ? PyUnicode_AsEncodedString(text, encoding, "backslashreplace") : NULL;
    if (bytes == NULL || !PyBytes_Check(bytes)) {
        PyErr_Clear();
        Py_XDECREF(bytes);
        self->broken = 1;
        return;
    }
    const char *data = PyBytes_AS_STRING(bytes);
    Py_ssize_t left = PyBytes_GET_SIZE(bytes);
    int saved = errno; /* the program's errno is its own */
    if (self->fd < 0) {
        int flags = O_WRONLY | O_CREAT | O_APPEND;
#ifdef O_CLOEXEC
        flags |= O_CLOEXEC;
#endif
        do {
            self->fd = open(PyBytes_AS_STRING(self->path), flags, 0644);
        } while (self->fd < 0 && errno == EINTR);
        if (self->fd < 0) {
            self->broken = 1;
        }
    }
    while (left > 0 && !self->broken) {
        ssize_t done = write(self->fd, data, (size_t)left);
        if (done < 0) {
            if (errno == EINTR) {
                continue;
            }
            self->broken = 1;
            break;
        }
        data += done;
        left -= done;
    }
    errno = saved;
    Py_DECREF(bytes);
}

static PyObject *tee_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Tee *self = (Tee *)callable;
    PyObject *result = PyObject_Vectorcall(self->write, args, nargsf, kwnames);
    if (result != NULL && PyVectorcall_NARGS(nargsf) == 1 && kwnames == NULL) {
        copy_text(self, args[0]);
    }
    return result;
}

static PyObject *tee_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *write, *path, *encoding;
    if (!PyArg_ParseTuple(args, "OSU:Tee", &write, &path, &encoding)) {
        return NULL;
    }
    Tee *self = (Tee *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    Py_INCREF(write);
    Py_INCREF(encoding);
    Py_INCREF(path);
    self->write = write;
    self->encoding = encoding;
    self->path = path;
    self->fd = -1;
    self->broken = 0;
    self->vectorcall = tee_vectorcall;
    return (PyObject *)self;
}

static int tee_traverse(Tee *self, visitproc visit, void *arg) {
    Py_VISIT(self->write);
    Py_VISIT(self->encoding);
    Py_VISIT(self->path);
    return 0;
}

static int tee_clear(Tee *self) {
    Py_CLEAR(self->write);
    Py_CLEAR(self->encoding);
    Py_CLEAR(self->path);
    return 0;
}

static void tee_dealloc(Tee *self) {
    PyObject_GC_UnTrack(self);
    if (self->fd >= 0) {
        close(self->fd);
    }
    tee_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *tee_broken(Tee *self, void *closure) {
    return PyBool_FromLong(self->broken);
}

static PyGetSetDef tee_getset[] = {
    {"broken", (getter)tee_broken, NULL, "Whether the copy stopped (an append failed).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject TeeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "runtime._teewrite.Tee",
    .tp_basicsize = sizeof(Tee),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = tee_new,
    .tp_dealloc = (destructor)tee_dealloc,
    .tp_traverse = (traverseproc)tee_traverse,
    .tp_clear = (inquiry)tee_clear,
    .tp_vectorcall_offset = offsetof(Tee, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_getset = tee_getset,
    .tp_doc = "Tee(write, path, encoding): write(text), and text appended to the file at path.",
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_teewrite", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__teewrite(void) {
    if (PyType_Ready(&TeeType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&TeeType);
    if (PyModule_AddObject(m, "Tee", (PyObject *)&TeeType) < 0) {
        Py_DECREF(&TeeType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
