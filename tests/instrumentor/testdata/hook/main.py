"""Entry of the import-hook test: fails in a nested module so the traceback spans files."""
from lib import work

print("instrumented:", hasattr(work, "__sp_on__"))
work.outer(3)
