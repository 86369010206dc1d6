"""The project's own exception hierarchy.

Errors of the layers below (aiodocker, aiomysql, litellm) are translated at the boundary into
these, keeping the context (container id, image, model, task) that the scheduler and the user need.
`UserError` subclasses are mistakes the user can fix: the CLI prints their message as one line.
"""

from __future__ import annotations


class OrchestratorError(Exception):
    """Base of every error this project raises on purpose."""


class UserError(OrchestratorError):
    """A mistake the user can fix; printed as one line, no traceback."""


class ConfigError(UserError):
    """A bad setting, file or command-line value."""


class DataDirError(UserError):
    """The benchmark data directory is missing or incomplete."""


class EngineUnavailable(UserError):
    """No Docker engine answers (at start), or it stopped answering for longer than a sweep waits."""


class ImageError(UserError):
    """An image is unknown, missing or failed to build."""


class SandboxError(OrchestratorError):
    """A container or its driver failed; the container is no longer trusted."""

    def __init__(self, message: str, *, container_id: str | None = None, image: str | None = None):
        context = ", ".join(f"{k}={v}" for k, v in (("image", image), ("container", container_id and container_id[:12])) if v)
        super().__init__(f"{message} ({context})" if context else message)
        self.container_id = container_id
        self.image = image


class DriverLost(SandboxError):
    """The in-container driver process died or its stream closed."""


class DriverExited(DriverLost):
    """The driver's stream ended: its process is gone (killed, or its container stopped)."""


class ContainerDied(SandboxError):
    """The container stopped while it was in use."""


class EngineLost(SandboxError):
    """The connection to the Docker engine failed mid-run (a restart, a crash, a closed stream):
    infrastructure, never the task's fault. The run waits for the engine and re-runs the episode."""


class EngineStalled(EngineLost):
    """The engine answers ping but a call took longer than its deadline (a half-deadlocked dockerd):
    handled as an engine that went away, until such calls are answered again."""
