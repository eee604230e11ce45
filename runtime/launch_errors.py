"""The launcher's error: bad options, bad sweep files, missing tools. `launch.main` prints it."""

from runtime.errors import ScaleprobeRuntimeError


class LaunchError(ScaleprobeRuntimeError):
    """Something the user can fix: the message names the option, file or tool."""
