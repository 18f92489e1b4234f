"""The reference agent: a Python client that registers like a SkyWalking agent
and heart-beats. Tests, the demo and the benchmarks use it."""

from skyoap.agent.client import Agent, AgentIds

__all__ = ["Agent", "AgentIds"]
