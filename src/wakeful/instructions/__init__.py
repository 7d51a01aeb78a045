"""Instruction sources and value deltas: read once per attempt, hashed, admitted as one delta."""

from ..events import INSTRUCTION_REMOVED as REMOVED  # the public name of the mark
from ._sources import BUILTIN, Source, agent_sources, host_sources, workspace_sources
from ._sync import Baseline, InstructionSync, baseline, epoch_snapshot, sync_instructions

__all__ = [
    "BUILTIN",
    "REMOVED",
    "Baseline",
    "InstructionSync",
    "Source",
    "baseline",
    "epoch_snapshot",
    "sync_instructions",
    "workspace_sources",
    "agent_sources",
    "host_sources",
]
