"""Warm containers, leased per episode, driven through one long-lived in-container driver."""

from orchestrator.pool.config import ActionLimits, Hardening, ImagePoolConfig
from orchestrator.pool.container import State
from orchestrator.pool.driver import ExecResult
from orchestrator.pool.pool import Pool, PoolClosed
from orchestrator.pool.sandbox import Sandbox

__all__ = ["ActionLimits", "ExecResult", "Hardening", "ImagePoolConfig", "Pool", "PoolClosed", "Sandbox", "State"]
