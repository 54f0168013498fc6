"""A job's failure as this project's error: Spark wraps what the Python workers raised in its own."""

from __future__ import annotations

import re

from srm.errors import ReplicationError, SrmError

_OWN_ERROR = re.compile(r"^srm\.errors\.(\w+): (.+)$", re.MULTILINE)
_PYTHON_ERROR = re.compile(r"^([\w.]*(?:Error|Exception)): (.+)$", re.MULTILINE)


def user_error(exc: BaseException) -> SrmError:
    """The last error this project raised inside Spark, else the last Python error, else Spark's."""
    from srm import errors

    text = str(exc)
    own = _OWN_ERROR.findall(text)
    if own:
        name, message = own[-1]
        cls = getattr(errors, name, ReplicationError)
        return (
            cls(message) if issubclass(cls, SrmError) and cls is not errors.ConfigError else ReplicationError(message)
        )
    python = _PYTHON_ERROR.findall(text)
    if python:
        name, message = python[-1]
        return ReplicationError(f"{name}: {message}")
    return ReplicationError(text.splitlines()[0] if text else type(exc).__name__)
