"""Tasks: what an episode is asked to do, loaded from InterCode's formats, from our starter set, from
Harbor task folders (tasks/harbor.py) or from an environment directory of yours.

    tasks = load_tasks("nl2bash-fs1", data_dir)          # list[Task]
    tasks = load_tasks("spider", data_dir)
    tasks = load_tasks("starter-bash")                    # no data dir needed
"""

from tasks.model import Task
from tasks.registry import (
    DATASETS,
    DatasetInfo,
    dataset_info,
    load_tasks,
    register_dataset,
)

__all__ = ["DATASETS", "DatasetInfo", "Task", "dataset_info", "load_tasks", "register_dataset"]
