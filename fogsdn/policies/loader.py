"""Loading a user's policy module, by file path or importable name, in any process; every
error is one line naming the file and the cause.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
import traceback
from pathlib import Path
from types import ModuleType

from fogsdn import legacy_names
from fogsdn.core.errors import one_line
from fogsdn.core.scenario import is_policy_path as is_path
from fogsdn.policies.base import USER_CODE_ERRORS, Policy, PolicyError
from fogsdn.policies.watchdog import user_call, watchdog

_LOADED: dict[str, tuple[type[Policy], ...]] = {}


def error_line(err: BaseException, path: str) -> str:
    """`line N` of the user's file where the exception was raised, when it was there."""
    for frame in reversed(traceback.extract_tb(err.__traceback__)):
        if frame.filename == path:
            return f" (line {frame.lineno})"
    return ""


def _import_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise PolicyError(f"policy.module: {path}: no such file")
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:8]
    mod_name = f"_fogsdn_policy_{path.stem.replace('-', '_')}_{digest}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise PolicyError(f"policy.module: {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module  # dataclasses look their module up while the file runs
    try:
        with watchdog():
            user_call(f"{path}: importing it", spec.loader.exec_module, module)
    except USER_CODE_ERRORS as err:
        del sys.modules[mod_name]
        if isinstance(err, PolicyError):  # refusing a built-in's name, or the time limit
            raise
        if isinstance(err, SyntaxError):
            raise PolicyError(f"{path}: syntax error at line {err.lineno}: {err.msg}") from None
        raise PolicyError(f"{path}: importing it raised {one_line(err)}"
                          f"{error_line(err, str(path))}") from None
    return module


def _import_name(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except PolicyError:
        raise
    except ModuleNotFoundError as err:
        raise PolicyError(f"policy.module: cannot import {name!r}: {err}") from None
    except SyntaxError as err:
        raise PolicyError(f"{err.filename}: syntax error at line {err.lineno}: {err.msg}") from None
    except USER_CODE_ERRORS as err:
        raise PolicyError(f"{name}: importing it raised {one_line(err)}") from None


def policy_classes(module: ModuleType) -> tuple[type[Policy], ...]:
    """The concrete Policy subclasses a module defines (not the ones it imports)."""
    return tuple(
        obj for obj in vars(module).values()
        if inspect.isclass(obj) and issubclass(obj, Policy) and obj is not Policy
        and obj.__module__ == module.__name__ and not inspect.isabstract(obj)
    )


def load_policy_module(ref: str) -> tuple[type[Policy], ...]:
    """The policies a module defines, each module loaded once per process."""
    if ref in _LOADED:
        return _LOADED[ref]
    where = str(Path(ref)) if is_path(ref) else ref
    legacy_names.install()  # a file written for the old layout still loads, warned
    module = _import_file(Path(ref)) if is_path(ref) else _import_name(ref)
    classes = policy_classes(module)
    if not classes:
        raise PolicyError(f"{where}: defines no Policy subclass (class Mine(Policy) with "
                          "name and routes)")
    for cls in classes:
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not name:
            raise PolicyError(f"{where}: {cls.__name__} has no `name` (a ClassVar[str])")
    _LOADED[ref] = classes
    return classes
