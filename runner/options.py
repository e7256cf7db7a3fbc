"""Kept for callers of the old name: scenario resolution lives with the policies."""

from controller.policies.resolve import resolve_scenario

__all__ = ["resolve_scenario"]
