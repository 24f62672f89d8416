"""The one exception type that reaches the user as a plain sentence."""


class GeomlensError(Exception):
    """A problem with the user's input: the message says what is wrong and what to do.

    The command line prints the message alone (no traceback) and exits with code 2.
    """
