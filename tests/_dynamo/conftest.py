"""Every compiler test must run a graph compiled by the neuron backend, as compiled code.

tests/conftest.py gives each test a private compile cache and fresh Dynamo state, and checks
the graph calls; a test that expects otherwise says so with its own ``graph_calls`` marker.
"""

import pytest


def pytest_itemcollected(item):
    # Appended after the test's own markers, so that those come first.
    item.add_marker(pytest.mark.graph_calls("compiled"))
