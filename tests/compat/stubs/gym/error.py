"""Errors of the gym stand-in (the subset of gym.error that registration raises)."""


class Error(Exception):
    """Base class of gym errors."""


class UnregisteredEnv(Error):
    """No environment is registered under the requested id."""


class DeprecatedEnv(Error):
    """The requested version of an environment is no longer registered."""
