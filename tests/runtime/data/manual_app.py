"""Uses only the manual API (no instrumentation)."""
import sys

from runtime.manual import Timer, epoch, mark, region, step


@region("load")
def load(i):
    return i * 2


def main():
    t = Timer()
    for e in epoch(range(2)):
        for b in step(range(3)):
            with t("FORWARD"):
                with region("compute", kind="function"):
                    load(b)
            mark("batches")
    with step(name="extra_step"):
        load(0)
    t.save(sys.argv[1])
    print(t.format())


main()
