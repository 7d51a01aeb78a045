"""The runner's modules import each other in one direction: no cycles (a cycle is how a turn
and its compaction used to share mutable state). On 02a1022 this finds `_turn`/`_compaction`
and `tools._base`/`tools._task`."""

from __future__ import annotations

import itertools

import grimp
import pytest


@pytest.mark.parametrize("package", ["wakeful.runner", "wakeful.runner.tools"])
def test_no_import_cycles_between_the_modules_of(package: str):
    graph = grimp.build_graph("wakeful")
    modules = sorted(m for m in graph.find_children(package) if not m.endswith(".tools"))
    cycles = [
        (a, b)
        for a, b in itertools.permutations(modules, 2)
        if graph.direct_import_exists(importer=a, imported=b)
        and graph.chain_exists(importer=b, imported=a)
    ]
    assert cycles == []
