"""The original side: run by the original's venv, never imported by the project.

    .venv-original/bin/python checks/differential/original_side.py ORIGINAL_DIR RUN_LABEL

Reads one JSON request per line on stdin and answers each with one JSON line on stdout:

    {"op": "open", "kind": "bash", "image": TAG, "alias": NAME, "data_path": FILE}
    {"op": "reset", "index": 3}
    {"op": "turn", "action": "ls /testbed"}   -> {"reward": .., "terms": {..}, "observation": ..}
    {"op": "close"}

The environments are the original's own classes, imported from ORIGINAL_DIR. A turn is what the
original's multi-turn script (experiments/eval_n_turn.py) did with one action: Bash and SQL step
the action, then step `submit` and take that reward; Python steps a `def` and submits its
function; CTF steps the action (a `submit FLAG` is scored). The containers are made here, by the
same docker-py call the original's `get_container` makes (detached, with a tty), under the names
it looks for, so that it finds and keeps them; they also carry the run's label, so that the
project can remove whatever a killed driver left. The image gets a per-suite alias: the original
names its containers after the image, and suites run side by side.
"""

import json
import os
import re
import socket
import sys
import time
import traceback
from typing import Dict, List

ORIGINAL_DIR, RUN_LABEL = sys.argv[1], sys.argv[2]
sys.path.insert(0, ORIGINAL_DIR)

import docker  # noqa: E402
from intercode.envs import ACTION_EXEC, AGENT_OBS, BashEnv, CTFEnv, PythonEnv, SqlEnv  # noqa: E402
from intercode.envs.bash import bash_env  # noqa: E402
from intercode.envs.python import python_env  # noqa: E402
from intercode.envs.sql import sql_env  # noqa: E402

CLIP = 4000  # characters of an observation sent back: enough to classify a difference
RETRY_OBSERVATION = "Test case did not pass. Please try again."
WRONG_FLAG = "Submitted flag is incorrect. Keep trying!"


# The original checks a preprocess function's annotations against typing's Dict and List, so these
# two are annotated that way (and this file has no `from __future__ import annotations`).
def preprocess_sql(record: Dict) -> List:
    return [f"use {record['db']}"]


def preprocess_ctf(record: Dict) -> List:
    commands = [f"cd /ctf/{record['task_id']}"]
    if "setup" in record:
        commands.append(record["setup"])
    return commands


class Harness:
    def __init__(self, request):
        self.kind = request["kind"]
        self.client = docker.from_env()
        self.alias = request["alias"]
        self.client.images.get(request["image"]).tag(self.alias, "latest")
        self.containers = []
        self.env = self._open(request)

    def _make(self, make):
        """The original's get_container lists every container on the engine, then inspects each:
        one of another user's that goes in between is a 404. Try again, as a person would."""
        for _ in range(10):
            try:
                return make()
            except docker.errors.NotFound:
                time.sleep(0.5)
        return make()

    def _run(self, name, **kwargs):
        """The original's get_container call, made first so that it finds the container."""
        container = self.client.containers.run(image=self.alias, name=name, detach=True, tty=True,
                                               labels={"icdiff.run": RUN_LABEL}, **kwargs)
        self.containers.append(container)
        return container

    def _open(self, request):
        name = f"{self.alias}_ic_ctr"
        data_path = request["data_path"]
        if self.kind == "bash":
            bash_env.IMAGE_TO_SETTINGS[self.alias] = "/bin/bash"  # the nl2bash images' shell
            self._run(name)
            self._run(f"{name}_eval")
            return self._make(lambda: BashEnv(image_name=self.alias, data_path=data_path))
        if self.kind == "ctf":
            self._run(name)
            return self._make(lambda: CTFEnv(image_name=self.alias, data_path=data_path, preprocess=preprocess_ctf))
        if self.kind == "python":
            port = free_port()
            self._run(name, ports={"3006/tcp": port})
            python_env.HOST_PORT = port  # the container's rpyc server, published on a free port
            return self._make(lambda: PythonEnv(image_name=self.alias, data_path=data_path, is_agent=True))
        if self.kind == "sql":
            container = self._run(name)
            container.reload()
            host = container.attrs["NetworkSettings"]["IPAddress"]
            wait_for_port(host, 3306)
            sql_env.SQL_CONFIG.update(host=host, port=3306)  # not the host's 3307: suites run side by side
            return self._make(lambda: SqlEnv(image_name=self.alias, data_path=data_path, preprocess=preprocess_sql))
        raise ValueError(f"unknown kind {self.kind}")

    def reset(self, index):
        self.env.reset(index)
        return {"ok": True}

    def turn(self, action):
        """One turn of eval_n_turn.py's loop for one action."""
        if self.kind == "python":
            return self._python_turn(action)
        if self.kind == "ctf":
            observation, reward, done, info = self.env.step(action)
            if done and reward != 1 and action.lower() != "skip":
                observation = WRONG_FLAG
            return {"reward": reward, "observation": clip(observation), "info": info_of(info)}
        if action != "skip":
            observation, _, _, info = self.env.step(action)
            executed = info.get(ACTION_EXEC)
        else:
            observation, executed = "skipped", True
        _, reward, _, info = self.env.step("submit")
        out = {"reward": reward, "observation": clip(observation), "executed": executed, "info": info_of(info)}
        if self.kind == "bash":
            terms = info.get("reward", {})
            out["terms"] = {name: terms.get(name) for name in ("file_diff", "file_changes", "answer_similarity")}
        return out

    def _python_turn(self, action):
        if not action.startswith("def"):
            observation, reward, _, info = self.env.step(action)
            return {"reward": reward, "observation": clip(observation)}
        name = re.match(r"def (\w+)\(", action).group(1)
        observation, reward, _, info = self.env.step(action)
        _, reward, _, info = self.env.step("submit " + name)
        if reward != 1 and any(len(v["error"]) > 0 for v in info[AGENT_OBS].values()):
            observation = RETRY_OBSERVATION
        return {"reward": reward, "observation": clip(observation)}

    def close(self):
        try:
            for container in self.containers:
                container.remove(force=True)
        finally:
            self.client.images.remove(self.alias, noprune=True)
        return {"ok": True}


def info_of(info):
    keep = ("diff_miss", "diff_extra", "eval_obs", "agent_obs", "corrupt_gold")
    return {key: clip(info[key]) for key in keep if key in info}


def clip(value):
    text = value if isinstance(value, str) else str(value)
    return text[:CLIP]


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(host, port, limit=120.0):
    deadline = time.monotonic() + limit
    while True:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.25)


def main():
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever the original prints goes to stderr, never into the answers
    harness = None
    for line in sys.stdin:
        request = json.loads(line)
        op = request["op"]
        try:
            if op == "open":
                harness = Harness(request)
                answer = {"ok": True}
            elif op == "reset":
                answer = harness.reset(request["index"])
            elif op == "turn":
                answer = harness.turn(request["action"])
            elif op == "close":
                answer = harness.close() if harness else {"ok": True}
                harness = None
            else:
                answer = {"error": f"unknown op {op}"}
        except Exception as exc:  # noqa: BLE001 — the original raised: that is the answer, the run goes on
            answer = {"error": f"{type(exc).__name__}: {exc}"[:500],
                      "where": traceback.format_exc(limit=3)[-800:]}
        out.write(json.dumps(answer, default=str) + "\n")
        if op == "close":
            break


if __name__ == "__main__":
    main()
