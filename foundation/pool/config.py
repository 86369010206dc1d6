"""Settings of the warm pool, one validated model per image."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from foundation.sandbox import ActionLimits

__all__ = ["ActionLimits", "Hardening", "ImagePoolConfig", "ServiceHealth", "ServiceSpec"]

# Docker's default capabilities minus those no task needs. NET_RAW stays: `ping` is in the
# original's toolset and the container has no network anyway.
DEFAULT_CAP_DROP = ["MKNOD", "AUDIT_WRITE", "SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT"]


class Hardening(BaseModel):
    """How an agent container is confined. The defaults suit every agent-facing image."""

    model_config = ConfigDict(extra="forbid")

    network: bool = Field(False, description="Attach to the default bridge; off means no network at all.")
    memory_mb: int = Field(1024, gt=0, description="Memory limit (swap included).")
    cpus: float = Field(1.0, gt=0, description="CPU quota in cores.")
    pids: int = Field(512, gt=16, description="Maximum number of processes: contains fork bombs.")
    cap_drop: list[str] = Field(default_factory=lambda: list(DEFAULT_CAP_DROP))
    cap_add: list[str] = Field(default_factory=list)
    hostname: str = Field("intercode", description="Fixed, so that gold and agent outputs agree.")
    disk_mb: int | None = Field(4096, ge=64, description="Most the container's writable layer may hold; a write "
                                "past it fails with ENOSPC inside the container (None: no cap). How it is "
                                "enforced depends on the engine: foundation/pool/disk.py.")
    inode_bytes: Literal[256, 512] = Field(512, description="The inode size of the file system a capped writable "
                                           "layer gets (where disk.py makes one): 512 keeps a copied-up directory's "
                                           "overlay xattrs in its inode, so `du` counts it 4K as in a fresh "
                                           "container; 256, ext4's default, gives them a block of their own (8K).")
    binds: list[str] = Field(default_factory=list, description="Host directories mounted into the container, "
                             "as the engine writes them (`HOST:CONTAINER:ro`): an installed agent's files and the "
                             "socket of its LLM gateway, which need no network.")
    tmpfs: dict[str, str] = Field(default_factory=dict, description="Paths in the container given an empty tmpfs of "
                                  "their own, each with its mount options (`rw,mode=755`), as `docker run --tmpfs`.")


class ServiceHealth(BaseModel):
    """A service's healthcheck, as a compose file gives it (Docker runs it in the service)."""

    model_config = ConfigDict(extra="forbid")

    test: list[str] = Field(description="As Docker's: [\"CMD\", ...], [\"CMD-SHELL\", \"...\"] or [\"NONE\"].")
    interval: float = Field(30.0, gt=0)
    timeout: float = Field(30.0, gt=0)
    retries: int = Field(3, ge=1)
    start_period: float = Field(0.0, ge=0)


class ServiceSpec(BaseModel):
    """A container beside the agent's, on the episode's own network, reached by its name there (a
    compose file's service: an API, an MCP server, a simulated user). It runs its image's command."""

    model_config = ConfigDict(extra="forbid")

    name: str
    image: str
    command: list[str] | None = None
    entrypoint: list[str] | None = None
    environment: dict[str, str] = Field(default_factory=dict)
    working_dir: str | None = None
    user: str | None = None
    healthcheck: ServiceHealth | None = Field(None, description="None: the image's own HEALTHCHECK, if it has one.")
    depends_on: dict[str, str] = Field(default_factory=dict, description="Service -> the condition it must meet "
                                       "first: service_started, service_healthy or service_completed_successfully.")


class ImagePoolConfig(BaseModel):
    """Sizes and recycling of the containers of one image."""

    model_config = ConfigDict(extra="forbid")

    min_idle: int = Field(1, ge=0, description="Idle containers kept warm.")
    max_size: int = Field(8, ge=1, description="Most containers of this image at once.")
    max_uses: int = Field(100, ge=1, description="Re-create a container after this many leases.")
    reset: bool = Field(True, description="Reset files and processes after each lease.")
    check_changes: bool = Field(True, description="Re-create when a lease changed system paths the reset can't restore.")
    wait_when_cpu_busy: bool = Field(True, description="While the CPUs are saturated and 2 or more containers of "
                                     "the image serve, a lease waits for one of them instead of creating another.")
    health_interval: float = Field(30.0, gt=0, description="Seconds between health checks of idle containers.")
    keeper: bool = Field(True, description="The container's first process is ours, which an agent's `kill -9 -1` "
                         "cannot kill (PID 1), so the container outlives it and its driver is started again; off: "
                         "the image's own CMD (a database server).")
    hardening: Hardening = Field(default_factory=Hardening)
    entrypoint: bool = Field(False, description="Run the image's own ENTRYPOINT, with our first process as its "
                             "arguments (as Harbor runs a task's image with `sleep infinity`): what it starts runs "
                             "beside the agent. An image that has one then serves one lease only (the reset would "
                             "stop what it started); the pool makes the next ahead of time.")
    services: list[ServiceSpec] = Field(default_factory=list, description="Containers beside each container of the "
                                        "image, on a network of its own (no route out unless `hardening.network`), "
                                        "started in dependency order and healthy before it is leased; the group "
                                        "serves one lease only (a service keeps state).")
