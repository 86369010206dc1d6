"""`[cluster]` of a sweep file: where the sweep's episodes run when they run on a Ray cluster's
hosts (the sweep's config reads it; the cluster's site is made from it)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_HOST_CONCURRENCY = 4096  # as a sweep's own concurrency


class ClusterSettings(BaseModel):
    """`[cluster]`: run the episodes on the hosts of a Ray cluster (docs/scale-out.md). Where they
    run does not change their results: none of this is part of the sweep's identity."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    ray: str = Field(description='the cluster: "auto" (the one this machine belongs to), "HOST:PORT" or "ray://HOST:PORT"')
    hosts: list[str] | None = Field(None, min_length=1, description="only these hosts (intercode_host_N); default: "
                                    "every node with an intercode_host_N resource, also those joining later")
    host_concurrency: int | None = Field(None, ge=1, le=MAX_HOST_CONCURRENCY, description="episodes at once per host "
                                         "(default: 8 per CPU of the host's node)")
    heartbeat: float = Field(2.0, gt=0, description="seconds between two pings of each host")
    host_timeout: float = Field(15.0, gt=0, description="seconds a host may leave a ping unanswered before it is "
                                "lost (its episodes in flight are re-run elsewhere)")
    ship_images: bool = Field(True, description="send the head's image build to hosts whose image differs (false: "
                              "refuse such a host)")

    @field_validator("ray")
    @classmethod
    def _an_address(cls, value: str) -> str:
        if value == "auto" or re.fullmatch(r"(ray://)?[\w.\-\[\]:]+:\d+", value):
            return value
        raise ValueError(f'expected "auto", "HOST:PORT" or "ray://HOST:PORT", not {value!r}')
