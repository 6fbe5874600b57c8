"""The examples in docstrings run."""

import doctest

import analyzers
import analyzers.posterior


def test_docstring_examples():
    for mod in (analyzers, analyzers.posterior):
        result = doctest.testmod(mod)
        assert result.attempted > 0 and result.failed == 0, mod.__name__
