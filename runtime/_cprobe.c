/* The C probe backend: the same functions as runtime/_pyprobe.py, at a fraction of the cost.
 *
 * Every thread owns a call stack and a call-path tree (nodes in one array, a hash table from
 * (parent node, region id) to child node). All access happens with the GIL held: the hot path
 * runs in the recording thread, take_deltas() in the flushing thread, so no further locking.
 * Times come from CLOCK_MONOTONIC, the clock of time.perf_counter_ns on Linux.
 *
 * Recursion is folded, so a tree holds only call paths without a repeated region, however the
 * program recurses (review 44: five functions calling each other in a data-dependent order made
 * 849,489 call paths). Direct recursion (a region entering itself) only counts `folded` in the
 * open frame. Indirect recursion (`a -> b -> a`) enters the node of `a` that is open already
 * (Node.open): child_of maps (b's node, a) to a's node, found once when the path is first seen. The
 * frame pushed is a fold frame (Frame.owner: the node's previous frame), whose children are the
 * node's (`a -> b -> a -> c` is recorded as `a -> c`), and counts as a recursive visit. When it
 * ends (count_frame):
 * - its own time is taken off the child time of the node's previous frame: the node's exclusive
 *   time gets it when that visit ends (inclusive time and visits are the outer visit's);
 * - the frames in between lend it its time (Frame.lent): their inclusive time leaves out what a
 *   region further up did inside them, which counts there. So the tree stays a tree of times:
 *   every call path's inclusive time is its exclusive time plus its children's inclusive times,
 *   and every nanosecond is some call path's own, once (the modeler's parts checks rely on it).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h> /* PyFrame_GetBack: Python.h declares it only since 3.11 */
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>

typedef struct {
    int64_t visits, incl, excl, min, max, rec;
    double sumsq;
    int64_t s_visits, s_incl, s_excl, s_rec;
    double s_sumsq;
    int32_t rid, parent;
    int32_t open; /* 1 + the stack index of its innermost frame on its thread, 0: not open */
} Node;

typedef struct {
    int32_t node, rid, folded;
    int32_t owner; /* a fold frame: 1 + the stack index of its node's previous frame; else 0 */
    int64_t child_ns, t0;
    int64_t lent; /* time of folded visits inside this one that count for a region further up */
} Frame;

typedef struct {
    uint64_t key; /* (parent << 32) | rid, 0 = empty slot (the root never is a child) */
    int32_t idx;
} Slot;

typedef struct ThreadState {
    Node *nodes;
    int32_t nnodes, ncap;
    Frame *stack;
    int32_t depth, scap;
    Slot *slots;
    uint32_t hmask, hused;
    struct ThreadState *next;
    volatile int dead; /* set by the thread-exit destructor; freed at the next take_deltas */
    unsigned long ident; /* its thread's (threading.get_ident()); 0: `retired` */
} ThreadState;

static _Thread_local ThreadState *tls = NULL;
static ThreadState *all_states = NULL;
static uint8_t *off = NULL;
static int64_t *iters = NULL, *iters_snap = NULL;
static Py_ssize_t cap = 0;
static int64_t dropped = 0;
/* When probes were last switched on (note_on; 0: never). A visit begun before it is open across a
 * window in which they were off (nothing is entered while they are): its time is not all measured
 * (its callees then were not), so it ends as a visit left open does, counting no visit and no time
 * of its own (drop_top), as the visits that the end of the run finds left open. */
static int64_t last_on = 0;
static pthread_key_t exit_key;
/* The code of the SystemExit in flight when the main thread last left its outermost region
 * (NULL: none was). sys.exit() patched by the recorder sets it too. How a program ended is
 * otherwise invisible to atexit, so this is how `raise SystemExit(n)` gets its exit code. */
static PyObject *exit_seen = NULL;
static PyObject *main_code = NULL; /* `__main__`'s code object (watch_main), compared by identity */
static PyObject *main_exit = NULL; /* the code of the SystemExit that unwound main_code (main_unwind) */
static unsigned long main_ident = 0; /* threading.main_thread().ident; a fork's child: its thread */

/* Runs at thread exit, without the GIL: only flag the state; the flusher frees it (with the GIL)
 * once its last deltas are taken, so programs that start many threads do not grow without end. */
static void thread_gone(void *p) { ((ThreadState *)p)->dead = 1; }

static void free_state(ThreadState *s) {
    free(s->nodes);
    free(s->stack);
    free(s->slots);
    free(s);
}

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline uint32_t hash_key(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (uint32_t)k;
}

static int32_t new_node(ThreadState *s, int32_t rid, int32_t parent) {
    if (s->nnodes == s->ncap) {
        int32_t ncap = s->ncap ? s->ncap * 2 : 64;
        Node *n = realloc(s->nodes, sizeof(Node) * (size_t)ncap);
        if (!n) return -1;
        s->nodes = n;
        s->ncap = ncap;
    }
    Node *n = &s->nodes[s->nnodes];
    memset(n, 0, sizeof(Node));
    n->min = INT64_MAX;
    n->rid = rid;
    n->parent = parent;
    return s->nnodes++;
}

static int rehash(ThreadState *s) {
    uint32_t ncap = s->slots ? (s->hmask + 1) * 2 : 256;
    Slot *ns = calloc(ncap, sizeof(Slot));
    if (!ns) return -1;
    if (s->slots) {
        for (uint32_t i = 0; i <= s->hmask; i++) {
            if (!s->slots[i].key) continue;
            uint32_t h = hash_key(s->slots[i].key) & (ncap - 1);
            while (ns[h].key) h = (h + 1) & (ncap - 1);
            ns[h] = s->slots[i];
        }
        free(s->slots);
    }
    s->slots = ns;
    s->hmask = ncap - 1;
    return 0;
}

static int32_t child_of(ThreadState *s, int32_t parent, int32_t rid) {
    uint64_t key = ((uint64_t)(uint32_t)parent << 32) | (uint32_t)rid;
    key += 1; /* never 0 */
    uint32_t h = hash_key(key) & s->hmask;
    for (;;) {
        Slot *sl = &s->slots[h];
        if (sl->key == key) return sl->idx;
        if (!sl->key) break;
        h = (h + 1) & s->hmask;
    }
    if ((s->hused + 1) * 2 > s->hmask + 1) {
        if (rehash(s) < 0) return -1;
        h = hash_key(key) & s->hmask;
        while (s->slots[h].key) h = (h + 1) & s->hmask;
    }
    int32_t idx = -1;
    for (int32_t up = parent; up > 0; up = s->nodes[up].parent) { /* rid further up: indirect recursion */
        if (s->nodes[up].rid == rid) {
            idx = up;
            break;
        }
    }
    if (idx < 0 && (idx = new_node(s, rid, parent)) < 0) return -1;
    s->slots[h].key = key;
    s->slots[h].idx = idx;
    s->hused++;
    return idx;
}

/* A thread's call tree, on no thread yet. */
static ThreadState *alloc_state(void) {
    ThreadState *s = calloc(1, sizeof(ThreadState));
    if (!s) return NULL;
    s->scap = 64;
    s->stack = malloc(sizeof(Frame) * (size_t)s->scap);
    if (!s->stack || rehash(s) < 0 || new_node(s, -1, -1) != 0) {
        free(s->stack);
        free(s->slots);
        free(s->nodes);
        free(s);
        return NULL;
    }
    s->stack[0].node = 0;
    s->stack[0].rid = -1;
    s->stack[0].folded = 0;
    s->stack[0].owner = 0;
    s->stack[0].lent = 0;
    s->stack[0].child_ns = 0;
    s->stack[0].t0 = 0;
    s->depth = 1;
    s->next = all_states;
    all_states = s;
    return s;
}

static void drop_left_open(ThreadState *s);

/* The ended threads' trees, merged by call path until the next take_deltas takes their deltas
 * (NULL: none). Review 54 F3: a program that starts a thread per task kept every ended thread's
 * tree (about 11 KB) until the next flush: 600 MB at 8,000 threads a second. */
static ThreadState *retired = NULL;

/* The deltas not yet taken of the ended thread `d` go to `retired`, node by node (a node's parent
 * comes before it in `nodes`), and `d` is freed. -1: out of memory (`d` stays, for take_deltas). */
static int retire(ThreadState *d) {
    if (!retired && !(retired = alloc_state())) return -1;
    int32_t *to = malloc(sizeof(int32_t) * (size_t)d->nnodes);
    if (!to) return -1;
    drop_left_open(d); /* the thread ended with visits left open (review 52 F5) */
    to[0] = 0;
    for (int32_t i = 1; i < d->nnodes; i++) {
        Node *n = &d->nodes[i];
        int32_t m = child_of(retired, to[n->parent], n->rid);
        if (m < 0) { /* out of memory: what was merged so far is taken out of `d` */
            for (int32_t j = 1; j < i; j++) {
                Node *k = &d->nodes[j];
                k->s_visits = k->visits, k->s_incl = k->incl, k->s_excl = k->excl, k->s_rec = k->rec, k->s_sumsq = k->sumsq;
            }
            free(to);
            return -1;
        }
        to[i] = m;
        Node *r = &retired->nodes[m];
        r->visits += n->visits - n->s_visits;
        r->incl += n->incl - n->s_incl;
        r->excl += n->excl - n->s_excl;
        r->rec += n->rec - n->s_rec;
        r->sumsq += n->sumsq - n->s_sumsq;
        if (n->visits && n->min < r->min) r->min = n->min;
        if (n->max > r->max) r->max = n->max;
    }
    free(to);
    for (ThreadState **link = &all_states; *link; link = &(*link)->next)
        if (*link == d) {
            *link = d->next;
            break;
        }
    free_state(d);
    return 0;
}

/* A thread's first visit: the trees of threads that have ended since are merged first. */
static ThreadState *new_state(void) {
    for (ThreadState *s = all_states, *next; s; s = next) {
        next = s->next;
        if (s->dead && s != retired) retire(s);
    }
    ThreadState *s = alloc_state();
    if (!s) return NULL;
    s->ident = PyThread_get_thread_ident();
    tls = s;
    pthread_setspecific(exit_key, s);
    return s;
}

/* enter, exit, mark, left and back never count against the program's recursion limit. CPython
 * 3.10/3.11 check the limit on every call of a METH_O function, which made a probe at the deepest frame of a
 * recursion fail one level early. They are METH_FASTCALL (a specialized call of those is not
 * checked on 3.11) and their function objects' vectorcall slots are set to calls without the
 * check (the first, unspecialized calls of every function go through those); see PyInit below. */
static PyObject *one_argument(const char *name, Py_ssize_t nargs) {
    PyErr_Format(PyExc_TypeError, "%s() takes exactly one argument (%zd given)", name, nargs);
    return NULL;
}

static inline int read_rid(PyObject *arg, Py_ssize_t *rid) {
    Py_ssize_t r = PyLong_AsSsize_t(arg);
    if (r < 0 || r >= cap) {
        if (r == -1 && PyErr_Occurred()) PyErr_Clear();
        dropped++;
        return 0; /* an id never defined: ignored rather than failing the user's program */
    }
    *rid = r;
    return 1;
}

/* off[rid]: REGION_OFF = not timed (throttled or filtered out); GPU_TARGET = the GPU rotation's
 * current target (runtime/gpu.py Rotation): enter/exit of that one region also call a Python hook.
 * Both in one byte, so every other region pays nothing for the rotation: enter tests off[rid] anyway,
 * exit tests one more byte. */
#define REGION_OFF 1
#define GPU_TARGET 2

static PyObject *gpu_hook_enter = NULL, *gpu_hook_exit = NULL; /* both set or both NULL */
static Py_ssize_t gpu_target = -1; /* the one rid with GPU_TARGET set, or -1 */

/* The visit bookkeeping of enter, after the checks. */
static void drop_top(ThreadState *s);

/* A visit of rid begins on thread `s` (its own, or another's while probes are off: push_stale). */
static inline void enter_state(ThreadState *s, Py_ssize_t rid) {
    Frame *top = &s->stack[s->depth - 1];
    if (top->rid == (int32_t)rid) {
        if (top->t0 >= last_on || top->folded) {
            top->folded++;
            s->nodes[top->node].rec++;
            return;
        }
        /* Open across a window with probes off and entered again: taken for the visit of a call
         * that returned while they were off (a producer's work() returning between the check of
         * runtime/stale_visits.py and the switch), not for recursion, which would fold every
         * later call into it. It ends as dropped, as it would at its own end (last_on); a call
         * that does recurse across the window has its outer visit dropped a little early. */
        drop_top(s);
        top = &s->stack[s->depth - 1];
    }
    int32_t node = child_of(s, top->node, (int32_t)rid);
    if (node < 0) { dropped++; return; }
    if (s->depth == s->scap) {
        Frame *ns = realloc(s->stack, sizeof(Frame) * (size_t)s->scap * 2);
        if (!ns) { dropped++; return; }
        s->stack = ns;
        s->scap *= 2;
    }
    int32_t idx = s->depth++;
    Frame *f = &s->stack[idx];
    Node *n = &s->nodes[node];
    f->node = node;
    f->rid = (int32_t)rid;
    f->folded = 0;
    f->owner = n->open; /* open already: indirect recursion, a fold frame */
    if (n->open) n->rec++;
    n->open = idx + 1;
    f->child_ns = 0;
    f->lent = 0;
    f->t0 = now_ns();
}

static inline PyObject *enter_timed(Py_ssize_t rid) {
    ThreadState *s = tls;
    if (!s && !(s = new_state())) { dropped++; Py_RETURN_NONE; }
    enter_state(s, rid);
    Py_RETURN_NONE;
}

/* The visit of rid that enter_state just began on this thread (on top) ends as one left open (as
 * drop(rid) has it: no visit counted, counted in `dropped`); a folded recursive one is no
 * recursive visit either. No Python code runs here. */
static void undo_enter(Py_ssize_t rid) {
    ThreadState *s = tls;
    if (!s || s->depth < 2) return;
    Frame *top = &s->stack[s->depth - 1];
    if (top->rid != (int32_t)rid) return;
    if (top->folded) { /* a folded direct-recursive visit */
        top->folded--;
        s->nodes[top->node].rec--;
        return;
    }
    if (top->owner) s->nodes[top->node].rec--; /* a fold frame (indirect recursion) */
    drop_top(s);
}

/* hook(arg) with a reference held meanwhile (the hook may replace the hooks); 0 or -1 (raised). */
static int call_hook(PyObject *hook, PyObject *arg) {
    if (!hook) return 0;
    Py_INCREF(hook);
    PyObject *res = PyObject_CallOneArg(hook, arg);
    Py_DECREF(hook);
    if (!res) return -1;
    Py_DECREF(res);
    return 0;
}

/* enter() of the GPU target: the visit as for any region (unless throttled), then the hook, so
 * that its start event falls inside the visit, as the enclosing regions' do. */
static PyObject *enter_target(PyObject *arg, Py_ssize_t rid) {
    int timed = !(off[rid] & REGION_OFF);
    if (timed) {
        PyObject *none = enter_timed(rid);
        Py_DECREF(none);
    }
    if (call_hook(gpu_hook_enter, arg) < 0) {
        /* The hook raised (a signal handler's KeyboardInterrupt, a CUDA error): the visit just
         * entered is undone before the exception goes on to the program (review 76 MED-3). The
         * program's `finally` does not run for an enter that raised, and a visit left open on
         * top would make every later visit of the region a folded recursive one. */
        if (timed) {
#if PY_VERSION_HEX >= 0x030C0000
            PyObject *exc = PyErr_GetRaisedException();
            undo_enter(rid); /* (note_outermost may clear an error of its own) */
            PyErr_SetRaisedException(exc);
#else
            PyObject *et, *ev, *etb;
            PyErr_Fetch(&et, &ev, &etb);
            undo_enter(rid);
            PyErr_Restore(et, ev, etb);
#endif
        }
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *p_enter(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 1) return one_argument("enter", nargs);
    PyObject *arg = args[0];
    Py_ssize_t rid;
    if (!read_rid(arg, &rid)) Py_RETURN_NONE;
    if (off[rid]) {
        if (off[rid] & GPU_TARGET) return enter_target(arg, rid);
        Py_RETURN_NONE;
    }
    return enter_timed(rid);
}

/* Runs only when the outermost region of a thread closes. */
static void note_outermost(void) {
    if (PyThread_get_thread_ident() != main_ident) return; /* a thread's SystemExit ends only the thread */
    PyObject *exc;
#if PY_VERSION_HEX >= 0x030B0000
    exc = PyErr_GetHandledException();
#else
    PyObject *et = NULL, *etb = NULL;
    PyErr_GetExcInfo(&et, &exc, &etb);
    Py_XDECREF(et);
    Py_XDECREF(etb);
#endif
    PyObject *code = NULL;
    if (exc && exc != Py_None && PyObject_TypeCheck(exc, (PyTypeObject *)PyExc_SystemExit)) {
        code = PyObject_GetAttrString(exc, "code");
        if (!code) PyErr_Clear();
    }
    Py_XDECREF(exc);
    Py_XSETREF(exit_seen, code);
}

/* The frame at stack index `i` ends at `t`; `inner`: time of an open visit inside it. A visit of
 * its node (its inclusive time less what it lent), or, for a fold frame, its own time to its
 * node's previous frame and its time lent by the frames in between (see the top). */
static inline void count_frame(ThreadState *s, int32_t i, int64_t t, int64_t inner) {
    Frame *f = &s->stack[i];
    Node *n = &s->nodes[f->node];
    int64_t dt = t - f->t0, own = dt - f->child_ns - inner;
    n->open = f->owner;
    if (f->owner) {
        int32_t prev = f->owner - 1;
        for (int32_t j = prev + 1; j < i; j++) s->stack[j].lent += dt - f->lent;
        s->stack[prev].child_ns -= own;
        return;
    }
    dt -= f->lent;
    n->visits++;
    n->incl += dt;
    n->excl += own;
    if (dt < n->min) n->min = dt;
    if (dt > n->max) n->max = dt;
    n->sumsq += (double)dt * (double)dt;
}

static void close_top(ThreadState *s, int64_t t) {
    int32_t i = --s->depth;
    count_frame(s, i, t, 0);
    s->stack[i - 1].child_ns += t - s->stack[i].t0;
    if (i == 1) note_outermost();
}

/* The visits above stack index `i` were left open (probes switched off mid-visit): each ends,
 * innermost first, as one with no time of its own and no visit counted. What its closed children
 * took (recorded under it) is its node's inclusive time (less what it lent) and no own time of
 * its caller's; a fold frame's goes to its node, and the frames in between lend it, as when a
 * fold ends. The dropped visits' own time stays in frame i's, and every call path's inclusive
 * time stays its exclusive time plus its children's (review 48 F1: crediting nothing, a path that
 * also had whole visits had children adding up to more than that; lending only a dropped fold's
 * own closed children, not those of the visits dropped above it, counted those twice). */
static void end_left_open(ThreadState *s, int32_t i) {
    for (int32_t j = s->depth - 1; j > i; j--) {
        Frame *f = &s->stack[j];
        Node *n = &s->nodes[f->node];
        int64_t took = f->child_ns;
        n->open = f->owner; /* innermost first */
        if (f->owner)
            for (int32_t k = f->owner; k < j; k++) s->stack[k].lent += took - f->lent;
        else
            n->incl += took - f->lent;
        s->stack[j - 1].child_ns += took;
    }
}

/* The visit on top ends as one left open (see last_on). */
static void drop_top(ThreadState *s) {
    dropped++;
    end_left_open(s, s->depth - 2);
    if (--s->depth == 1) note_outermost();
}

/* The visit bookkeeping of exit at time t, after the checks. */
static inline PyObject *exit_timed(Py_ssize_t rid, int64_t t) {
    ThreadState *s = tls;
    if (!s) {
        if (off[rid] & REGION_OFF) Py_RETURN_NONE;
        Py_RETURN_FALSE; /* not open on this thread (the manual API says so) */
    }
    Frame *top = &s->stack[s->depth - 1];
    if (top->rid != (int32_t)rid) {
        /* An untimed region's enter pushed nothing. A visit that began before its region was
         * throttled is on top and closes normally, so it never stays behind as a stale parent. */
        if (off[rid] & REGION_OFF) Py_RETURN_NONE;
        /* Frames above rid were left open (probes switched off mid-visit): drop them. */
        int32_t i;
        for (i = s->depth - 1; i > 0; i--)
            if (s->stack[i].rid == (int32_t)rid) break;
        if (i == 0) Py_RETURN_FALSE;
        dropped += s->depth - 1 - i;
        end_left_open(s, i);
        s->depth = i + 1;
        top = &s->stack[i];
    }
    if (top->folded) {
        top->folded--;
        Py_RETURN_NONE;
    }
    if (top->t0 < last_on) drop_top(s); /* open across a window with probes off */
    else close_top(s, t);
    Py_RETURN_NONE;
}

/* exit() of the GPU target: the hook first (its end event falls inside the visit), then the visit
 * ends, at the time read after the hook. The visit ends also when the hook raised (a signal
 * handler's KeyboardInterrupt): the exception then goes on to the program. */
static PyObject *exit_target(PyObject *arg, Py_ssize_t rid) {
    if (call_hook(gpu_hook_exit, arg) == 0) return exit_timed(rid, now_ns());
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
    Py_XDECREF(exit_timed(rid, now_ns()));
    PyErr_SetRaisedException(exc);
#else
    PyObject *et, *ev, *etb;
    PyErr_Fetch(&et, &ev, &etb);
    Py_XDECREF(exit_timed(rid, now_ns()));
    PyErr_Restore(et, ev, etb);
#endif
    return NULL;
}

static PyObject *p_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    int64_t t = now_ns();
    if (nargs != 1) return one_argument("exit", nargs);
    PyObject *arg = args[0];
    Py_ssize_t rid;
    if (!read_rid(arg, &rid)) Py_RETURN_NONE;
    if (off[rid] & GPU_TARGET) return exit_target(arg, rid);
    return exit_timed(rid, t);
}

/* The visits of thread `s` left open (probes switched off before they ended) end as dropped ones
 * do (end_left_open), counted in `dropped`. Its frames stay (see close_open). */
static void drop_left_open(ThreadState *s) {
    if (s->depth < 2) return;
    dropped += s->depth - 1;
    end_left_open(s, 0);
}

/* The end of the run: the visits still open on other threads (daemon threads that run for the
 * whole program) are counted as ending now; this thread's, unless `own`, were left open and end as
 * dropped visits do (counted in `dropped`); all of them do where `left` (probes are off at the end:
 * a schedule's window, set_enabled(False); visits then open were left so, and their time since the
 * probes went off is no time of theirs: review 52 F4, F5). The frames counted or dropped here
 * come off their stacks, as in the pure backend; this thread's, unless `own`, stay (nothing is
 * flushed after the final flush). Returns how many visits were counted as ending now. */
static long close_open(int own, int left) {
    int64_t t = now_ns();
    long count = 0;
    for (ThreadState *s = all_states; s; s = s->next) {
        if (s->dead) continue; /* take_deltas drops its visits left open */
        if (left || (s == tls && !own)) {
            drop_left_open(s);
            if (s != tls || own) s->depth = 1; /* (see below) */
            continue;
        }
        int64_t inner = 0;
        int32_t i;
        for (i = s->depth - 1; i > 0 && s->stack[i].t0 >= last_on; i--) {
            count_frame(s, i, t, inner);
            inner = t - s->stack[i].t0;
            count++;
        }
        if (i > 0) { /* frames 1..i were open across a window with probes off: they end as left open */
            int32_t depth = s->depth;
            s->stack[i].child_ns += inner; /* the visit counted above it is a closed child of it */
            s->depth = i + 1;
            dropped += i;
            end_left_open(s, 0);
            s->depth = depth;
        }
        /* Its frames come off its stack once all are counted (count_frame changes the counters
         * of the frames under one: a fold's lending, its node's innermost frame): a later exit of
         * one of them finds it not open (returns False) and counts nothing, as in the pure backend
         * (review 76, informational); nothing is flushed after the final flush anyway. */
        s->depth = 1;
    }
    return count;
}

static PyObject *p_take_deltas(PyObject *self, PyObject *unused);

/* take_deltas() of the final flush, with the other threads' open visits counted as ending now, in
 * one call: no thread can close one of them in between and have it counted twice; with own=True
 * this thread's too (a signal's default action ends the process where it stands); with left=True
 * none (probes are off: close_open). */
static PyObject *p_take_final_deltas(PyObject *self, PyObject *args) {
    int own = 0, left = 0;
    if (!PyArg_ParseTuple(args, "|pp", &own, &left)) return NULL;
    long closed = close_open(own, left);
    PyObject *deltas = p_take_deltas(self, NULL);
    if (!deltas) return NULL;
    return Py_BuildValue("(lN)", closed, deltas);
}

/* exit(rid) on a thread where rid is not open (a manual region entered on one thread, left on
 * another): close the visit on the thread where rid is the innermost open region, if exactly one
 * thread has it there. True if closed. */
/* Region ids are int32 in the frames: a larger one is refused, never an index past the tables. */
#define REGION_LIMIT ((Py_ssize_t)INT32_MAX)

static PyObject *p_exit_elsewhere(PyObject *self, PyObject *arg) {
    int64_t t = now_ns();
    Py_ssize_t rid = PyLong_AsSsize_t(arg);
    if (rid == -1 && PyErr_Occurred()) return NULL;
    if (rid < 0 || rid >= REGION_LIMIT) Py_RETURN_FALSE; /* no region's: never another's by truncation */
    ThreadState *found = NULL;
    for (ThreadState *s = all_states; s; s = s->next) {
        if (s == tls || s->dead || s->depth < 2 || s->stack[s->depth - 1].rid != (int32_t)rid) continue;
        if (found) Py_RETURN_FALSE; /* open on several threads: which one ended is unknown */
        found = s;
    }
    if (!found) Py_RETURN_FALSE;
    Frame *f = &found->stack[found->depth - 1];
    if (f->folded) {
        f->folded--;
        Py_RETURN_TRUE;
    }
    if (f->t0 < last_on) {
        dropped++;
        end_left_open(found, found->depth - 2);
        found->depth--;
        Py_RETURN_TRUE;
    }
    count_frame(found, found->depth - 1, t, 0);
    found->depth--;
    found->stack[found->depth - 1].child_ns += t - f->t0;
    Py_RETURN_TRUE;
}

/* drop(rid): the innermost visit of rid on this thread ends as one left open (end_left_open: no
 * visit counted, no own time), and the visits above it with it, counted in `dropped`; a folded
 * direct-recursive one is its outer visit's. For a manual region left while probes are off: a
 * `with` block knows its visit was opened, where instrumented code does not (review 52: the visit
 * stayed on the thread's stack, and the thread's later visits of it were counted as recursion
 * inside it). False: rid is not open on this thread. */
static PyObject *p_drop(PyObject *self, PyObject *arg) {
    Py_ssize_t rid = PyLong_AsSsize_t(arg);
    if (rid == -1 && PyErr_Occurred()) return NULL;
    ThreadState *s = tls;
    if (rid < 0 || rid >= REGION_LIMIT || !s) Py_RETURN_FALSE;
    int32_t i;
    for (i = s->depth - 1; i > 0; i--)
        if (s->stack[i].rid == (int32_t)rid) break;
    if (i == 0) Py_RETURN_FALSE;
    int folded = s->stack[i].folded > 0; /* the innermost visit is a folded one: the frame stays */
    dropped += s->depth - 1 - i + !folded;
    end_left_open(s, folded ? i : i - 1);
    s->depth = folded ? i + 1 : i;
    if (folded) s->stack[i].folded--;
    Py_RETURN_TRUE;
}

static PyObject *p_mark(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 1) return one_argument("mark", nargs);
    PyObject *arg = args[0];
    Py_ssize_t rid;
    if (read_rid(arg, &rid)) iters[rid]++;
    Py_RETURN_NONE;
}

static PyObject *too_large(Py_ssize_t rid) {
    PyErr_Format(PyExc_ValueError, "region id must be below %zd, got %zd", REGION_LIMIT, rid);
    return NULL;
}

static int grow(Py_ssize_t n) {
    if (n <= cap) return 0;
    if (n > REGION_LIMIT) return -1;
    Py_ssize_t ncap = cap * 2 > n ? cap * 2 : n;
    uint8_t *o = realloc(off, (size_t)ncap);
    if (!o) return -1;
    off = o;
    int64_t *it = realloc(iters, sizeof(int64_t) * (size_t)ncap);
    if (!it) return -1;
    iters = it;
    int64_t *sn = realloc(iters_snap, sizeof(int64_t) * (size_t)ncap);
    if (!sn) return -1;
    iters_snap = sn;
    memset(off + cap, 0, (size_t)(ncap - cap));
    memset(iters + cap, 0, sizeof(int64_t) * (size_t)(ncap - cap));
    memset(iters_snap + cap, 0, sizeof(int64_t) * (size_t)(ncap - cap));
    cap = ncap;
    return 0;
}

static PyObject *p_ensure_capacity(PyObject *self, PyObject *arg) {
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n > REGION_LIMIT) return too_large(n - 1);
    if (grow(n) < 0) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyObject *p_set_off(PyObject *self, PyObject *args) {
    Py_ssize_t rid;
    int flag;
    if (!PyArg_ParseTuple(args, "np", &rid, &flag)) return NULL;
    if (rid < 0) {
        PyErr_Format(PyExc_ValueError, "region id must not be negative, got %zd", rid);
        return NULL;
    }
    if (rid >= REGION_LIMIT) return too_large(rid);
    if (grow(rid + 1) < 0) return PyErr_NoMemory();
    off[rid] = (uint8_t)((off[rid] & GPU_TARGET) | (flag ? REGION_OFF : 0));
    Py_RETURN_NONE;
}

static void clear_target(void) {
    if (gpu_target >= 0 && gpu_target < cap) off[gpu_target] &= (uint8_t)~GPU_TARGET;
    gpu_target = -1;
}

static PyObject *p_set_gpu_hooks(PyObject *self, PyObject *args) {
    PyObject *on_enter, *on_exit;
    if (!PyArg_ParseTuple(args, "OO:set_gpu_hooks", &on_enter, &on_exit)) return NULL;
    if (on_enter == Py_None && on_exit == Py_None) {
        clear_target();
        Py_CLEAR(gpu_hook_enter);
        Py_CLEAR(gpu_hook_exit);
        Py_RETURN_NONE;
    }
    if (!PyCallable_Check(on_enter) || !PyCallable_Check(on_exit)) {
        PyErr_SetString(PyExc_TypeError, "set_gpu_hooks(on_enter, on_exit): two callables, or None, None");
        return NULL;
    }
    Py_INCREF(on_enter);
    Py_INCREF(on_exit);
    Py_XSETREF(gpu_hook_enter, on_enter);
    Py_XSETREF(gpu_hook_exit, on_exit);
    Py_RETURN_NONE;
}

static PyObject *p_set_gpu_target(PyObject *self, PyObject *arg) {
    Py_ssize_t rid = PyLong_AsSsize_t(arg);
    if (rid == -1 && PyErr_Occurred()) return NULL;
    if (rid >= REGION_LIMIT) return too_large(rid);
    if (rid >= 0 && grow(rid + 1) < 0) return PyErr_NoMemory();
    clear_target();
    if (rid >= 0 && gpu_hook_enter) {
        off[rid] |= GPU_TARGET;
        gpu_target = rid;
    }
    Py_RETURN_NONE;
}

static PyObject *p_gpu_target(PyObject *self, PyObject *unused) { return PyLong_FromSsize_t(gpu_target); }

static PyObject *path_of(ThreadState *s, int32_t idx) {
    int32_t depth = 0;
    for (int32_t i = idx; i > 0; i = s->nodes[i].parent) depth++;
    PyObject *t = PyTuple_New(depth);
    if (!t) return NULL;
    for (int32_t i = idx; i > 0; i = s->nodes[i].parent) {
        PyObject *v = PyLong_FromLong(s->nodes[i].rid);
        if (!v) { Py_DECREF(t); return NULL; }
        PyTuple_SET_ITEM(t, --depth, v);
    }
    return t;
}

/* Deltas of every node changed since the previous call, merged over threads by the recorder. */
static PyObject *p_take_deltas(PyObject *self, PyObject *unused) {
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    ThreadState **link = &all_states;
    while (*link) {
        ThreadState *s = *link;
        int dead = s->dead; /* read first: a state seen dead gets no more updates */
        if (dead && s != tls) drop_left_open(s); /* the thread ended with visits left open (review 52 F5) */
        for (int32_t i = 1; i < s->nnodes; i++) {
            Node *n = &s->nodes[i];
            if (n->visits == n->s_visits && n->rec == n->s_rec && n->incl == n->s_incl) continue; /* (incl alone: a visit dropped) */
            PyObject *path = path_of(s, i);
            if (!path) { Py_DECREF(out); return NULL; }
            int64_t dv = n->visits - n->s_visits, dr = n->rec - n->s_rec;
            PyObject *item = Py_BuildValue("(NLLLLLdL)", path, (long long)(dv + dr),
                                           (long long)(n->incl - n->s_incl), (long long)(n->excl - n->s_excl),
                                           (long long)(n->visits ? n->min : 0), (long long)n->max,
                                           n->sumsq - n->s_sumsq, (long long)dr);
            if (!item || PyList_Append(out, item) < 0) {
                Py_XDECREF(item);
                Py_DECREF(out);
                return NULL;
            }
            Py_DECREF(item);
            n->s_visits = n->visits;
            n->s_incl = n->incl;
            n->s_excl = n->excl;
            n->s_rec = n->rec;
            n->s_sumsq = n->sumsq;
        }
        if ((dead && s != tls) || s == retired) { /* everything it measured is in `out` */
            if (s == retired) retired = NULL;
            *link = s->next;
            free_state(s);
        } else {
            link = &s->next;
        }
    }
    return out;
}

static PyObject *p_take_iterations(PyObject *self, PyObject *unused) {
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    for (Py_ssize_t r = 0; r < cap; r++) {
        if (iters[r] == iters_snap[r]) continue;
        PyObject *item = Py_BuildValue("(nL)", r, (long long)(iters[r] - iters_snap[r]));
        if (!item || PyList_Append(out, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(item);
        iters_snap[r] = iters[r];
    }
    return out;
}

/* The call path of this thread's innermost open visit, as the profile records it (folded). */
static PyObject *p_current_path(PyObject *self, PyObject *unused) {
    ThreadState *s = tls;
    if (!s) return PyTuple_New(0);
    return path_of(s, s->stack[s->depth - 1].node);
}

static PyObject *p_open_visits(PyObject *self, PyObject *unused) {
    ThreadState *s = tls;
    return PyLong_FromLong(s ? s->depth - 1 : 0);
}

/* open_stacks(): [(thread ident, ((rid, t0), ...)), ...], the visits open on each running thread
 * that has had one (none open: an empty tuple), outermost first (a folded direct-recursive visit is its outer one's), for the check of visits
 * whose function returned while probes were off (runtime/stale_visits.py). Called with the
 * collector paused: no Python code may run while `all_states` is walked. */
static PyObject *p_open_stacks(PyObject *self, PyObject *unused) {
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    for (ThreadState *s = all_states; s; s = s->next) {
        if (s->dead || s == retired) continue;
        PyObject *visits = PyTuple_New(s->depth - 1);
        if (!visits) goto fail;
        for (int32_t i = 1; i < s->depth; i++) {
            PyObject *v = Py_BuildValue("(iL)", (int)s->stack[i].rid, (long long)s->stack[i].t0);
            if (!v) {
                Py_DECREF(visits);
                goto fail;
            }
            PyTuple_SET_ITEM(visits, i - 1, v);
        }
        PyObject *entry = Py_BuildValue("(kN)", s->ident, visits);
        if (!entry || PyList_Append(out, entry) < 0) {
            Py_XDECREF(entry);
            goto fail;
        }
        Py_DECREF(entry);
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* drop_stale(ident, pos, t0): on thread `ident`, the visit at position `pos` of open_stacks()'s
 * list (1: the outermost) and those above it end as visits left open do (end_left_open: no visit
 * counted, no time of their own, counted in `dropped`), if that position still holds the visit
 * open_stacks() saw (begun at t0). Returns how many ended (frames). */
static PyObject *p_drop_stale(PyObject *self, PyObject *args) {
    unsigned long ident;
    int pos;
    long long t0;
    if (!PyArg_ParseTuple(args, "kiL", &ident, &pos, &t0)) return NULL;
    for (ThreadState *s = all_states; s; s = s->next) {
        if (s->dead || s == retired || s->ident != ident) continue;
        if (pos < 1 || pos >= s->depth || s->stack[pos].t0 != (int64_t)t0) break;
        int32_t n = s->depth - pos;
        dropped += n;
        end_left_open(s, pos - 1);
        s->depth = pos;
        return PyLong_FromLong(n);
    }
    return PyLong_FromLong(0);
}

/* push_stale(ident, rids): on thread `ident`, visits of the regions `rids` (outermost first) begin
 * now, while probes are off: the functions that thread runs, entered while probes were off, get a
 * visit, so that what they call once probes are on is recorded under them (runtime/stale_visits.py).
 * Begun before note_on(), each ends as a dropped visit. Regions not timed are passed over. Returns
 * how many began. */
static PyObject *p_push_stale(PyObject *self, PyObject *args) {
    unsigned long ident;
    PyObject *rids;
    if (!PyArg_ParseTuple(args, "kO!", &ident, &PyTuple_Type, &rids)) return NULL;
    for (ThreadState *s = all_states; s; s = s->next) {
        if (s->dead || s == retired || s->ident != ident) continue;
        long n = 0;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(rids); i++) {
            Py_ssize_t rid;
            if (!read_rid(PyTuple_GET_ITEM(rids, i), &rid) || off[rid]) continue;
            enter_state(s, rid);
            n++;
        }
        return PyLong_FromLong(n);
    }
    return PyLong_FromLong(0);
}

/* note_on(): probes are switched on now (see last_on). */
static PyObject *p_note_on(PyObject *self, PyObject *unused) {
    last_on = now_ns();
    Py_RETURN_NONE;
}

static PyObject *p_reset_after_fork(PyObject *self, PyObject *unused) {
    ThreadState *s = all_states;
    while (s) {
        ThreadState *next = s->next;
        free_state(s);
        s = next;
    }
    all_states = NULL;
    retired = NULL;
    tls = NULL;
    pthread_setspecific(exit_key, NULL);
    if (cap) {
        memset(iters, 0, sizeof(int64_t) * (size_t)cap);
        memset(iters_snap, 0, sizeof(int64_t) * (size_t)cap);
    }
    dropped = 0;
    last_on = 0; /* (no visit is open in the child) */
    clear_target(); /* CUDA does not survive fork: the rotation's hooks are the parent's */
    Py_CLEAR(gpu_hook_enter);
    Py_CLEAR(gpu_hook_exit);
    Py_CLEAR(exit_seen);
    Py_CLEAR(main_exit);
    main_ident = PyThread_get_thread_ident(); /* the forking thread is the child's main thread */
    Py_RETURN_NONE;
}

static PyObject *p_dropped(PyObject *self, PyObject *unused) { return PyLong_FromLongLong(dropped); }

static PyObject *p_exit_seen(PyObject *self, PyObject *unused) {
    if (!exit_seen) Py_RETURN_NONE;
    return Py_BuildValue("(O)", exit_seen);
}

static PyObject *p_set_exit_seen(PyObject *self, PyObject *code) {
    Py_INCREF(code);
    Py_XSETREF(exit_seen, code);
    Py_RETURN_NONE;
}

/* Python 3.12+: the recorder's sys.monitoring PY_UNWIND callback, which sees the SystemExit that
 * unwinds `__main__` however it was raised. PY_UNWIND cannot be set for one code object only: it
 * runs for every frame an exception leaves. In C it costs no frame, so no recursion level (a
 * Python callback at the deepest frame of a program at its limit raised RecursionError in place of
 * the program's own exception), and little time. */

static PyObject *p_watch_main(PyObject *self, PyObject *code) {
    Py_INCREF(code);
    Py_XSETREF(main_code, code);
    Py_RETURN_NONE;
}

static PyObject *p_main_unwind(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs == 3 && main_code && args[0] == main_code &&
        PyObject_TypeCheck(args[2], (PyTypeObject *)PyExc_SystemExit)) {
        PyObject *code = PyObject_GetAttrString(args[2], "code");
        if (code) Py_XSETREF(main_exit, code);
        else PyErr_Clear();
    }
    Py_RETURN_NONE;
}

static PyObject *p_main_exit(PyObject *self, PyObject *unused) {
    if (!main_exit) Py_RETURN_NONE;
    return Py_BuildValue("(O)", main_exit);
}

/* sys.exit as the recorder installs it: the real one (METH_FASTCALL, `status=None, /`), which also
 * notes the code when the main thread exits. In C, so that it costs the program no recursion level
 * and adds no frame to the SystemExit's traceback. */
static PyObject *p_sys_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs > 1) {
        PyErr_Format(PyExc_TypeError, "exit expected at most 1 argument, got %zd", nargs);
        return NULL;
    }
    PyObject *status = nargs ? args[0] : Py_None;
    if (PyThread_get_thread_ident() == main_ident) { /* elsewhere it ends a thread only */
        Py_INCREF(status);
        Py_XSETREF(exit_seen, status);
    }
    PyErr_SetObject(PyExc_SystemExit, status);
    return NULL;
}

static PyMethodDef sys_exit_def = {
    "exit", (PyCFunction)(void (*)(void))p_sys_exit, METH_FASTCALL,
    "exit($module, status=None, /)\n--\n\n"
    "Exit the interpreter by raising SystemExit(status).\n\n"
    "If the status is omitted or None, it defaults to zero (i.e., success).\n"
    "If the status is an integer, it will be used as the system exit status.\n"
    "If it is another kind of object, it will be printed and the system\n"
    "exit status will be one (i.e., failure)."};

/* call_noting(func, note): func(); where it raises, note(exception) first, and the exception goes on
 * as it was (a note that fails is forgotten). A C function, so no frame of scaleprobe's is in the
 * exception's traceback (review 42: the traceback a multiprocessing child prints for its target
 * showed the recorder's Python wrapper). */
static PyObject *p_call_noting(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "call_noting(func, note) takes 2 arguments");
        return NULL;
    }
    PyObject *result = PyObject_CallNoArgs(args[0]);
    if (result != NULL) return result;
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
    PyObject *r = PyObject_CallOneArg(args[1], exc ? exc : Py_None);
    if (r == NULL) PyErr_Clear();
    Py_XDECREF(r);
    PyErr_SetRaisedException(exc);
#else
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL) PyException_SetTraceback(value, tb);
    PyObject *r = PyObject_CallOneArg(args[1], value ? value : Py_None);
    if (r == NULL) PyErr_Clear();
    Py_XDECREF(r);
    PyErr_Restore(type, value, tb);
#endif
    return NULL;
}

static PyObject *p_threads(PyObject *self, PyObject *unused) {
    long n = 0;
    for (ThreadState *s = all_states; s; s = s->next) n++;
    return PyLong_FromLong(n);
}

/* ----- suspensions: which frames left their regions at a yield/await -------------------------------
 *
 * An instrumented generator or coroutine leaves its open regions after a yield/await's operand and
 * calls left(); after the suspension (returned or raised) back() says whether that happened, so it
 * re-enters exactly what it left (an exception raised by the operand finds nothing noted). The
 * state lives here, keyed by the suspending frame, not in a local of the user's function (which
 * locals(), f_locals and debuggers would show).
 *
 * The key is the PyFrameObject of the function: a generator's or coroutine's frame object stays the
 * same from its first left() to its last back(). A comprehension runs in a frame of its own before
 * Python 3.12; its suspensions (left(1), back(1)) are keyed by the function's frame, as the
 * function's statement guard, which re-enters when one of them raised, runs there. Every
 * suspension that called left() is followed by a back() in the same frame, also when the generator
 * is closed or dropped (close() throws GeneratorExit in at the suspension), or a statement of its
 * own swallowed the exception (the guard's finally). Where none follows (a generator that ignores
 * GeneratorExit, an async generator never finalized), the note stays: it holds a reference to the
 * frame object, so no later frame can be allocated at that address and take the note for its own
 * (the frame's locals stay alive with it; the generator itself is freed). Since Python 3.11 only:
 * there a generator's frame object neither owns nor traverses its locals while the generator
 * lives, so the reference keeps no reference cycle through a suspended generator alive; a 3.10
 * frame object is the generator's frame, and holding it would. One set for the whole
 * process (a generator may be resumed on another thread), used with the GIL held. */

static PyObject *comp_suffix = NULL; /* "comp>": <listcomp>, <setcomp>, <dictcomp> */
static uintptr_t *held = NULL; /* open addressing, linear probing; 0 = empty */
static size_t held_mask = 0, held_used = 0;

static inline size_t held_slot(uintptr_t key) { return (size_t)hash_key((uint64_t)key) & held_mask; }

static int held_grow(void) {
    size_t ncap = held ? (held_mask + 1) * 2 : 64;
    uintptr_t *nh = calloc(ncap, sizeof(uintptr_t));
    if (!nh) return -1;
    uintptr_t *old = held;
    size_t oldcap = held ? held_mask + 1 : 0;
    held = nh;
    held_mask = ncap - 1;
    for (size_t i = 0; i < oldcap; i++) {
        if (!old[i]) continue;
        size_t h = held_slot(old[i]);
        while (held[h]) h = (h + 1) & held_mask;
        held[h] = old[i];
    }
    free(old);
    return 0;
}

static inline int is_comprehension(PyFrameObject *f) {
    PyCodeObject *code = PyFrame_GetCode(f);
    PyObject *name = code->co_name;
    int found = PyUnicode_GET_LENGTH(name) > 5 && PyUnicode_READ_CHAR(name, 0) == '<' &&
                PyUnicode_Tailmatch(name, comp_suffix, 1, PY_SSIZE_T_MAX, 1) == 1;
    Py_DECREF(code);
    return found;
}

/* The frame of the caller of left()/back(); `inner`: past comprehension frames. */
static uintptr_t owner_frame(int inner) {
    PyFrameObject *f = PyEval_GetFrame();
    while (inner && f && is_comprehension(f)) {
        PyFrameObject *back = PyFrame_GetBack(f);
        if (!back) break;
        Py_DECREF(back); /* alive: its frame is executing (it called the comprehension) */
        f = back;
    }
    return (uintptr_t)f;
}

/* The optional argument `inner` of left()/back(): a true value from a comprehension's element,
 * conditions or inner iterables, which may run in a frame of their own (before Python 3.12). */
static int read_inner(const char *name, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs > 1) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most 1 argument (%zd given)", name, nargs);
        return -1;
    }
    return nargs ? PyObject_IsTrue(args[0]) : 0;
}

static PyObject *p_left(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    int inner = read_inner("left", args, nargs);
    if (inner < 0) return NULL;
    uintptr_t key = owner_frame(inner);
    if (!key) Py_RETURN_TRUE;
    if ((held_used + 1) * 2 > held_mask + 1 && held_grow() < 0) {
        dropped++; /* its regions stay left: back() finds nothing to re-enter */
        Py_RETURN_TRUE;
    }
    size_t h = held_slot(key);
    while (held[h]) {
        if (held[h] == key) Py_RETURN_TRUE;
        h = (h + 1) & held_mask;
    }
    held[h] = key;
    held_used++;
#if PY_VERSION_HEX >= 0x030B0000
    Py_INCREF((PyObject *)key); /* see the section's comment: no address is reused while noted */
#endif
    Py_RETURN_TRUE;
}

static PyObject *held_remove(uintptr_t key);

static PyObject *p_back(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    int inner = read_inner("back", args, nargs);
    if (inner < 0) return NULL;
    if (!held_used) Py_RETURN_FALSE;
    return held_remove(owner_frame(inner));
}

/* back() on behalf of `frame` (the `async with` wrapper's __aexit__, for the coroutine that awaits it). */
static PyObject *p_back_of(PyObject *self, PyObject *frame) {
    if (!held_used) Py_RETURN_FALSE;
    return held_remove((uintptr_t)frame);
}

static PyObject *held_remove(uintptr_t key) {
    if (!key) Py_RETURN_FALSE;
    size_t h = held_slot(key);
    while (held[h] != key) {
        if (!held[h]) Py_RETURN_FALSE;
        h = (h + 1) & held_mask;
    }
    /* removed by shifting the rest of its cluster back: no tombstones */
    held_used--;
    size_t hole = h;
    for (size_t j = (h + 1) & held_mask; held[j]; j = (j + 1) & held_mask) {
        size_t home = held_slot(held[j]);
        /* held[j] may move into the hole unless its home lies cyclically in (hole, j] */
        if (((j - home) & held_mask) >= ((j - hole) & held_mask)) {
            held[hole] = held[j];
            hole = j;
        }
    }
    held[hole] = 0;
#if PY_VERSION_HEX >= 0x030B0000
    Py_DECREF((PyObject *)key); /* not the last reference: the frame is executing */
#endif
    Py_RETURN_TRUE;
}

static PyObject *p_left_count(PyObject *self, PyObject *unused) { return PyLong_FromSize_t(held_used); }

/* release_held(): every note is forgotten, at the end of the run. A generator that ignored
 * GeneratorExit left one that no back() takes, and its frame object kept what the frame held: the
 * `finally:`/`__exit__`/`__del__` of those objects never ran, even at exit (review 55 F3), where
 * the original finalizes them at shutdown. The table is emptied before the references are
 * dropped: dropping one may run code that notes again. */
static PyObject *p_release_held(PyObject *self, PyObject *unused) {
    uintptr_t *old = held;
    size_t cap = held ? held_mask + 1 : 0;
    held = NULL;
    held_mask = 0;
    held_used = 0;
#if PY_VERSION_HEX >= 0x030B0000
    for (size_t i = 0; i < cap; i++)
        if (old[i]) Py_DECREF((PyObject *)old[i]);
#endif
    free(old);
    Py_RETURN_NONE;
}

/* ----- the launcher: a script run at the recursion depth `python script.py` gives it ------------------ */

/* The launcher runs the program's code some ten levels deep (runpy, its own functions). Python
 * counts those levels against the program's recursion limit, which a program that sets a small
 * limit (or recurses close to it) would notice. run_toplevel evaluates the code with this thread's
 * counter set back to zero, as the interpreter has it when it runs a script's module, and puts the
 * launcher's levels back afterwards: the limit and sys.setrecursionlimit() stay the program's own. */
#define LAUNCHER_HEADROOM 200 /* levels the launcher may need after the program, whatever its limit */

static int program_limit = 0; /* the program's own limit, when run_toplevel had to raise it */

static int used_depth(PyThreadState *ts) {
#if PY_VERSION_HEX >= 0x030C0000
    return ts->py_recursion_limit - ts->py_recursion_remaining;
#elif PY_VERSION_HEX >= 0x030B0000
    return ts->recursion_limit - ts->recursion_remaining;
#else
    return ts->recursion_depth;
#endif
}

static void add_depth(PyThreadState *ts, int levels) {
#if PY_VERSION_HEX >= 0x030C0000
    ts->py_recursion_remaining -= levels;
#elif PY_VERSION_HEX >= 0x030B0000
    ts->recursion_remaining -= levels;
#else
    ts->recursion_depth += levels;
#endif
}

static PyObject *p_run_toplevel(PyObject *self, PyObject *args) {
    PyObject *code, *globals;
    if (!PyArg_ParseTuple(args, "O!O!:run_toplevel", &PyCode_Type, &code, &PyDict_Type, &globals)) return NULL;
    PyThreadState *ts = PyThreadState_Get();
    int depth = used_depth(ts);
    add_depth(ts, -depth);
    /* Setting the limit keeps every thread's depth as it is: the shift survives it. */
    PyObject *res = PyEval_EvalCode(code, globals, globals);
    add_depth(ts, depth);
    int limit = Py_GetRecursionLimit();
    if (limit < depth + LAUNCHER_HEADROOM) {
        /* The program lowered the limit below what the launcher needs to finish (its frames are
         * back on the count now); the launcher restores it when it returns. */
        program_limit = limit;
        Py_SetRecursionLimit(depth + LAUNCHER_HEADROOM);
    }
    return res;
}

static PyObject *p_take_program_limit(PyObject *self, PyObject *unused) {
    int limit = program_limit;
    program_limit = 0;
    if (!limit) Py_RETURN_NONE;
    return PyLong_FromLong(limit);
}

static PyMethodDef methods[] = {
    {"enter", (PyCFunction)(void (*)(void))p_enter, METH_FASTCALL, "enter(rid): a visit of region rid begins on this thread."},
    {"call_noting", (PyCFunction)(void (*)(void))p_call_noting, METH_FASTCALL,
     "call_noting(func, note): func(); where it raises, note(exception) first (no frame of its own)."},
    {"exit", (PyCFunction)(void (*)(void))p_exit, METH_FASTCALL,
     "exit(rid): the innermost visit of region rid ends. False if rid is timed but not open on this thread."},
    {"mark", (PyCFunction)(void (*)(void))p_mark, METH_FASTCALL, "mark(rid): one iteration of loop region rid."},
    {"ensure_capacity", p_ensure_capacity, METH_O, "Make region ids below n valid."},
    {"set_off", p_set_off, METH_VARARGS, "set_off(rid, off): stop or resume timing region rid."},
    {"set_gpu_hooks", p_set_gpu_hooks, METH_VARARGS,
     "set_gpu_hooks(on_enter, on_exit): called with the rid by enter (after it) and exit (before it) of the GPU target; None, None: none."},
    {"set_gpu_target", p_set_gpu_target, METH_O, "set_gpu_target(rid): the region whose enter/exit call the GPU hooks (-1: none; none without hooks)."},
    {"gpu_target", p_gpu_target, METH_NOARGS, "The GPU target region, or -1."},
    {"take_deltas", p_take_deltas, METH_NOARGS, "Changed call paths since the previous call."},
    {"take_iterations", p_take_iterations, METH_NOARGS, "Loop iteration counts since the previous call."},
    {"current_path", p_current_path, METH_NOARGS, "The call path of this thread's innermost open visit, outermost region first."},
    {"open_visits", p_open_visits, METH_NOARGS, "Visits open on this thread (a folded direct-recursive one counts with its outer visit)."},
    {"reset_after_fork", p_reset_after_fork, METH_NOARGS, "Forget everything (in a forked child)."},
    {"dropped", p_dropped, METH_NOARGS, "Visits dropped (left open, unknown ids, out of memory)."},
    {"exit_seen", p_exit_seen, METH_NOARGS, "(code,) of the SystemExit that last left the main thread's outermost region, or None."},
    {"set_exit_seen", p_set_exit_seen, METH_O, "set_exit_seen(code): a SystemExit(code) is on its way (sys.exit)."},
    {"take_final_deltas", p_take_final_deltas, METH_VARARGS,
     "(visits still open on other threads, counted as ending now; take_deltas()) for the final flush."},
    {"exit_elsewhere", p_exit_elsewhere, METH_O, "exit_elsewhere(rid): close rid where it is innermost on another thread."},
    {"drop", p_drop, METH_O, "drop(rid): the innermost visit of rid on this thread ends as one left open (dropped)."},
    {"release_held", p_release_held, METH_NOARGS, "Forget every left() note (the end of the run)."},
    {"push_stale", p_push_stale, METH_VARARGS, "push_stale(ident, rids): visits of rids begin on that thread (probes off)."},
    {"note_on", p_note_on, METH_NOARGS, "Probes are switched on now: the visits open now end as dropped ones."},
    {"open_stacks", p_open_stacks, METH_NOARGS, "[(thread ident, ((rid, t0), ...)), ...]: the visits open on each running thread."},
    {"drop_stale", p_drop_stale, METH_VARARGS, "drop_stale(ident, pos, t0): that thread's visits from position pos on end as left open."},
    {"watch_main", p_watch_main, METH_O, "watch_main(code): the code object of `__main__`, for main_unwind."},
    {"main_unwind", (PyCFunction)(void (*)(void))p_main_unwind, METH_FASTCALL,
     "main_unwind(code, offset, exc): a sys.monitoring PY_UNWIND callback; notes a SystemExit leaving `__main__`."},
    {"main_exit", p_main_exit, METH_NOARGS, "(code,) of the SystemExit that unwound `__main__` (main_unwind), or None."},
    {"threads", p_threads, METH_NOARGS, "Call trees kept (ended threads go at the next take_deltas)."},
    {"left", (PyCFunction)(void (*)(void))p_left, METH_FASTCALL,
     "left(inner=0): the calling generator or coroutine left its regions at a suspension (inner: from a comprehension). True."},
    {"back", (PyCFunction)(void (*)(void))p_back, METH_FASTCALL,
     "back(inner=0): whether the calling generator or coroutine left its regions and has not come back yet; forgets it."},
    {"back_of", p_back_of, METH_O, "back_of(frame): back() on behalf of `frame`."},
    {"_left_count", p_left_count, METH_NOARGS, "Frames noted by left() and not yet by back() (for tests)."},
    {"run_toplevel", p_run_toplevel, METH_VARARGS,
     "run_toplevel(code, globals): exec(code, globals) at the recursion depth of a script's module."},
    {"take_program_limit", p_take_program_limit, METH_NOARGS,
     "The program's recursion limit if run_toplevel raised it for the launcher's own finish, else None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_cprobe", "scaleprobe's C probe backend.", -1, methods};

static unsigned long find_main_ident(void) {
    unsigned long ident = PyThread_get_thread_ident();
    PyObject *threading = PyImport_ImportModule("threading");
    PyObject *main = threading ? PyObject_CallMethod(threading, "main_thread", NULL) : NULL;
    PyObject *id = main ? PyObject_GetAttrString(main, "ident") : NULL;
    if (id && PyLong_Check(id)) ident = PyLong_AsUnsignedLong(id);
    if (PyErr_Occurred()) PyErr_Clear();
    Py_XDECREF(id);
    Py_XDECREF(main);
    Py_XDECREF(threading);
    return ident;
}

/* The vectorcalls of enter, exit and mark: what CPython's own does for METH_FASTCALL, less the
 * recursion check (these functions never recurse, so the check protects nothing here). */
typedef PyObject *(*fastcall)(PyObject *, PyObject *const *, Py_ssize_t);

static inline PyObject *call_unchecked(PyObject *func, fastcall meth, const char *name, PyObject *const *args,
                                       size_t nargsf, PyObject *kwnames) {
    if (kwnames && PyTuple_GET_SIZE(kwnames)) {
        PyErr_Format(PyExc_TypeError, "%s() takes no keyword arguments", name);
        return NULL;
    }
    return meth(PyCFunction_GET_SELF(func), args, PyVectorcall_NARGS(nargsf));
}

static PyObject *vc_enter(PyObject *f, PyObject *const *a, size_t n, PyObject *k) { return call_unchecked(f, p_enter, "enter", a, n, k); }
static PyObject *vc_exit(PyObject *f, PyObject *const *a, size_t n, PyObject *k) { return call_unchecked(f, p_exit, "exit", a, n, k); }
static PyObject *vc_mark(PyObject *f, PyObject *const *a, size_t n, PyObject *k) { return call_unchecked(f, p_mark, "mark", a, n, k); }
static PyObject *vc_left(PyObject *f, PyObject *const *a, size_t n, PyObject *k) { return call_unchecked(f, p_left, "left", a, n, k); }
static PyObject *vc_back(PyObject *f, PyObject *const *a, size_t n, PyObject *k) { return call_unchecked(f, p_back, "back", a, n, k); }

static int unchecked_call(PyObject *module, const char *name, vectorcallfunc vc) {
    PyObject *f = PyObject_GetAttrString(module, name);
    if (!f) return -1;
    if (PyCFunction_Check(f)) ((PyCFunctionObject *)f)->vectorcall = vc;
    Py_DECREF(f);
    return 0;
}

PyMODINIT_FUNC PyInit__cprobe(void) {
    if (grow(1024) < 0 || held_grow() < 0) return PyErr_NoMemory();
    comp_suffix = PyUnicode_InternFromString("comp>");
    if (!comp_suffix) return NULL;
    main_ident = find_main_ident();
    if (pthread_key_create(&exit_key, thread_gone) != 0) {
        PyErr_SetString(PyExc_OSError, "pthread_key_create failed");
        return NULL;
    }
    PyObject *m = PyModule_Create(&moddef);
    if (m && (unchecked_call(m, "enter", vc_enter) < 0 || unchecked_call(m, "exit", vc_exit) < 0 ||
              unchecked_call(m, "mark", vc_mark) < 0 || unchecked_call(m, "left", vc_left) < 0 ||
              unchecked_call(m, "back", vc_back) < 0)) {
        Py_CLEAR(m);
    }
    /* named as sys.exit is, so that messages and inspect.signature read the same */
    PyObject *sys_name = m ? PyUnicode_FromString("sys") : NULL;
    PyObject *sys_exit = sys_name ? PyCFunction_NewEx(&sys_exit_def, m, sys_name) : NULL;
    Py_XDECREF(sys_name);
    if (m && (!sys_exit || PyModule_AddObject(m, "sys_exit", sys_exit) < 0)) {
        Py_XDECREF(sys_exit);
        Py_CLEAR(m);
    }
    return m;
}
