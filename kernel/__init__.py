"""The shared kernel: plain Python that several apps build on and none owns.

failures    what went wrong, classified once (retried or not), and how it is written down: the error classes
            every channel raises, `classify()` and the stored-error rule `format_error()`. The queue retries
            by it, the workflow engine decides a step's retries by it, the channel adapters raise it.
local_time  a wall-clock time in a zone as an instant: the one rule for DST gaps (forward to the jump) and
            repeats (the first), read by waits, send windows and calendar-day caps.
"""
