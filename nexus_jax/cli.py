"""One way for every command line entry point to report bad input: one line, exit code 2.

Entry points (`python -m train`, `train.evaluate`, `nexus_jax.play`, the bench scripts, ...)
build their parser with `ArgumentParser` and wrap their `main` with `@entry_point`. Anything
the user gave that cannot be used (an argument, a config file or key, a run folder, a
checkpoint, an env param) raises `UserInputError` with a message naming the file, key or
value; the wrapper prints `<prog>: error: <message>` as one line on stderr and returns 2.
Every other exception is a bug and keeps its traceback. Commands validate all their input
before they write anything, so a failing command leaves nothing on disk.
"""
from __future__ import annotations

import argparse
import functools
import sys
from typing import Callable


class UserInputError(Exception):
    """Input from the user that a command cannot use; the message names the file, key or value."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse that raises UserInputError instead of printing usage and exiting (one error line)."""

    def error(self, message: str):
        raise UserInputError(f"{message} (see --help)")


def positive_int(text: str) -> int:
    """argparse `type=` for counts (episodes, steps): an integer >= 1, named in the error otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def folder_name(text: str) -> str:
    """argparse `type=` for a run folder's name (runs/<name>/): one path component, not '.' or '..'."""
    if not text or "/" in text or text in (".", ".."):
        raise argparse.ArgumentTypeError(f"expected a folder name, got {text!r}")
    return text


def one_line(text: str) -> str:
    """Collapse a multi-line message (a YAML parser's, say) onto one line."""
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


def params_error(what: str, err: Exception) -> UserInputError:
    """A params ValueError/TypeError (it names the field) as user input from `what` (a flag, a config key)."""
    return UserInputError(f"{what}: {one_line(err)}")


def entry_point(prog: str) -> Callable:
    """Decorate `main(argv=None, ...) -> int | None`: UserInputError -> one stderr line, exit code 2;
    Ctrl-C that the command did not handle itself -> one stderr line, exit code 130 (no traceback)."""

    def wrap(main: Callable) -> Callable:
        @functools.wraps(main)
        def run(*args, **kwargs) -> int:
            try:
                return main(*args, **kwargs) or 0
            except UserInputError as e:
                print(f"{prog}: error: {one_line(e)}", file=sys.stderr, flush=True)
                return 2
            except KeyboardInterrupt:
                print(f"{prog}: interrupted", file=sys.stderr, flush=True)
                return 130

        return run

    return wrap
