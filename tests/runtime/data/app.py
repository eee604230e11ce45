"""A small program instrumented by hand exactly as the instrumentor emits code (probe ABI).

argv[1] picks what it does after its training loop: ok, raise, sigterm, hang, fork, mp, threads.
"""
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, mark as __sp_mark__, \
    iterate as __sp_iterate__, define as __sp_define__
__sp_on__ = __sp_define__(__name__, globals(), "app.py", (
    (0, "function", "fib", 20), (1, "function", "main", 27), (2, "epoch", "main.epoch", 30),
    (3, "step", "main.step", 33), (4, "loop", "main.inner", 36), (5, "function", "tiny", 45),
    (6, "function", "worker", 52),
))
import os
import signal
import sys
import threading
import time


def fib(n):
    if __sp_on__: __sp_enter__(0)
    try:
        return n if n < 2 else fib(n - 1) + fib(n - 2)
    finally:
        if __sp_on__: __sp_exit__(0)


def main(epochs, steps):
    if __sp_on__: __sp_enter__(1)
    try:
        if __sp_on__: __sp_enter__(2)
        try:
            for e in __sp_iterate__(2, range(epochs)):
                if __sp_on__: __sp_enter__(3)
                try:
                    for s in __sp_iterate__(3, range(steps)):
                        fib(8)
                        if __sp_on__: __sp_enter__(4)
                        try:
                            for i in range(5):
                                if __sp_on__: __sp_mark__(4)
                                tiny()
                        finally:
                            if __sp_on__: __sp_exit__(4)
                finally:
                    if __sp_on__: __sp_exit__(3)
        finally:
            if __sp_on__: __sp_exit__(2)
    finally:
        if __sp_on__: __sp_exit__(1)


def tiny():
    if __sp_on__: __sp_enter__(5)
    try:
        return None
    finally:
        if __sp_on__: __sp_exit__(5)


def worker(n):
    if __sp_on__: __sp_enter__(6)
    try:
        for _ in range(n):
            tiny()
        return n
    finally:
        if __sp_on__: __sp_exit__(6)


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
    epochs = int(os.environ.get("APP_EPOCHS", "2"))
    steps = int(os.environ.get("APP_STEPS", "3"))
    main(epochs, steps)
    if mode == "raise":
        raise ValueError("boom")
    if mode == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)
    if mode == "hang":
        print("ready", flush=True)
        time.sleep(60)
    if mode == "fork":
        pid = os.fork()
        if pid == 0:
            worker(7)
            from runtime.probe import finish
            finish()
            os._exit(0)
        os.waitpid(pid, 0)
    if mode == "mp":
        import multiprocessing as mp
        ctx = mp.get_context(sys.argv[2] if len(sys.argv) > 2 else "fork")
        pool = ctx.Pool(2)
        print(sum(pool.map(worker, [3, 4, 5, 6])))
        pool.close()  # workers leave normally (terminate() would SIGTERM them)
        pool.join()
    if mode == "threads":
        from runtime.probe import flush
        flush()  # makes the throttling decision before the threads run
        ts = [threading.Thread(target=worker, args=(100,)) for _ in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    if mode == "exit3":
        sys.exit(3)
