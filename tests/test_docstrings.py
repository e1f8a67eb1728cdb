"""The shared docstring blocks: every placeholder filled, indentation kept."""

import importlib
import inspect
import pkgutil
import re

import pytest

import sklearn_orfit
from sklearn_orfit._docstrings import fill_doc

_PLACEHOLDER_LINE = re.compile(r"^\s*\{\w+\}\s*$", flags=re.M)


def _documented_objects():
    for info in pkgutil.walk_packages(sklearn_orfit.__path__, "sklearn_orfit."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if getattr(obj, "__module__", None) != module.__name__:
                continue
            yield obj
            if inspect.isclass(obj):
                for member in vars(obj).values():
                    yield member.fget if isinstance(member, property) else member


def test_no_placeholder_is_left_unfilled():
    unfilled = [getattr(obj, "__qualname__", repr(obj)) for obj in _documented_objects()
                if isinstance(getattr(obj, "__doc__", None), str)
                and _PLACEHOLDER_LINE.search(obj.__doc__)]
    assert not unfilled, f"docstrings with a placeholder but no @fill_doc(): {unfilled}"


def test_fill_doc_indents_each_line_of_the_block():
    @fill_doc(entry="a : int\n    The a.\n\n    More.")
    def f():
        """Summary.

        Parameters
        ----------
        {entry}
        b : {"x", "y"}
            Braces elsewhere stay as they are.
        """

    assert f.__doc__ == '''Summary.

        Parameters
        ----------
        a : int
            The a.

            More.
        b : {"x", "y"}
            Braces elsewhere stay as they are.
        '''


def test_fill_doc_refuses_an_unknown_block_and_keeps_a_stripped_docstring():
    def documented():
        """{no_such_block}"""

    with pytest.raises(KeyError, match="no_such_block"):
        fill_doc()(documented)

    def stripped():
        pass

    assert fill_doc()(stripped).__doc__ is None
