"""Per-trajectory solve outcomes (mirror of include/shoal/ode/status.hpp)."""

import enum


class Status(enum.IntEnum):
    """Why a trajectory stopped. Saves after a failure are NaN."""

    SUCCESS = 0
    MAX_STEPS_REACHED = 1
    STEP_SIZE_UNDERFLOW = 2
    NON_FINITE = 3
    INVALID_INPUT = 4
    EVENT = 5  # stopped at a terminal event (not a failure: saves after it are NaN)
    CANCELLED = 6  # Ctrl-C (SIGINT) in a CPU solve; the main thread raises KeyboardInterrupt
    # Differentiated: the joint solve of y and its sensitivities failed on the sensitivities
    # alone (their step size underflowed or they went NaN/Inf while y's own error was within
    # tolerance). The plain solve may well succeed; see README "Failure modes".
    SENSITIVITY_FAILURE = 7
