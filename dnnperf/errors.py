"""The one exception type that reaches the user as a single line and exit code 2."""


class DnnperfError(Exception):
    """Bad input: a message that says what is wrong and how to fix it."""

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:  # one line, always
        return " ".join(self.message.split())


class TooNoisy(DnnperfError):
    """Measurements that never settle: the machine is too busy to calibrate or validate on (exit 4:
    not a bug, not bad input; a script may wait and try again)."""

    exit_code = 4
