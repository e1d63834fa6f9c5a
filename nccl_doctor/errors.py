"""Errors the CLI turns into one line on stderr and exit code 2."""


class DoctorError(Exception):
    """Bad input or a run that could not finish: the message is the whole story for the user."""

    exit_code = 2


class InputError(DoctorError):
    """The user's input (path, log, value, environment) cannot be used."""
