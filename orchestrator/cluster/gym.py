"""The gymnasium ids of the cluster: `intercode-cluster-{kind}-v0`, the synchronous wrapper of
environments/gym.py with its environment on a host of a Ray cluster.

    env = gymnasium.make("orchestrator.cluster.gym:intercode-cluster-bash-v0", ray="HEAD:PORT")
    observation, info = env.reset(options={"index": 0})
    observation, reward, terminated, truncated, info = env.step("ls /starter")
    env.close()                                     # the container goes back to its host's pool

Reset, step, score and close behave as IntercodeGymEnv's; the tasks are loaded here and sent to
the host. Ray is initialized with `ray` unless it is already (then `ray` is not needed); close()
leaves Ray as it is, since other environments of the process may use it.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import gymnasium

from environments.gym import IntercodeGymEnv
from environments.kind import BUILTIN, kind_spec
from foundation.errors import ConfigError
from orchestrator.cluster.trainer import open_environment

if TYPE_CHECKING:
    from orchestrator.cluster.remote import RemoteEnvironment


class ClusterGymEnv(IntercodeGymEnv):
    def __init__(self, kind: str, ray: str | None = None, host: str | None = None, dataset: str | None = None,
                 data_dir: str | Path | None = None, run_id: str | None = None,
                 reward_mode: str = "original") -> None:
        if reward_mode != "original":
            raise ConfigError("reward_mode on a cluster is the hosts' own (their agents' settings)")
        self.address, self.host, self.run_id = ray, host, run_id
        super().__init__(kind, dataset, data_dir, reward_mode)

    async def _open(self, stack: AsyncExitStack, data_dir: Path | None,  # type: ignore[override]
                    reward_mode: str) -> RemoteEnvironment:
        opened = open_environment(self.kind, address=self.address, host=self.host, data_dir=data_dir,
                                  run_id=self.run_id)
        return await stack.enter_async_context(opened)


for _kind in (kind for kind in BUILTIN if kind_spec(kind).datasets):
    gymnasium.register(id=f"intercode-cluster-{_kind}-v0", entry_point="orchestrator.cluster.gym:ClusterGymEnv", kwargs={"kind": _kind},
                       disable_env_checker=True)
