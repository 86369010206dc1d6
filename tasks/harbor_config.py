"""task.toml, read as Harbor (0.26, its TaskConfig) reads it.

    settings, warnings = read_config(text)     # Unsupported or Malformed: one line naming the field

Every field Harbor's TaskConfig accepts is accepted here. What changes how a task runs is used
(timeouts, resources, network, environment variables, the working directory, the healthcheck, the users,
a prebuilt `docker_image`, MCP servers, `skills_dir`, artifacts, [[steps]] and their reward
strategy); what does not is ignored ([task], [metadata], `source`, `gpu_types`); what changes it in
a way we can't honour raises Unsupported, naming the field (a separate verifier per step, an MCP server
over stdio, GPUs, TPUs, Windows). A key Harbor does
not know that is close to one it does (a typo: `[agent2]`, `timout_sec`) is a warning naming the
one meant: Harbor ignores it silently, we say
so; a key close to none Harbor knows (a corpus's own table: `[reference_pattern]`) is ignored in
silence, as Harbor ignores it. A value of the wrong shape raises Malformed.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import tomllib
from collections.abc import Collection, Mapping
from typing import Any

AGENT_TIMEOUT, VERIFIER_TIMEOUT, BUILD_TIMEOUT = 600.0, 600.0, 600.0  # Harbor's defaults
MEMORY_MB, STORAGE_MB = 2048, 10240  # ours when task.toml gives none (Harbor leaves them to the provider)
NETWORK_MODES = ("public", "no-network", "allowlist")
HEALTHCHECK: dict[str, float] = {"interval_sec": 5.0, "timeout_sec": 30.0, "start_period_sec": 0.0,
                                  "start_interval_sec": 5.0, "retries": 3}  # Harbor's defaults
# The keys Harbor's TaskConfig knows, per table ("" is the top level). [metadata] is free.
KNOWN: dict[str, frozenset[str]] = {
    "": frozenset({"version", "schema_version", "source", "multi_step_reward_strategy", "task", "metadata",
                   "verifier", "agent", "environment", "solution", "steps", "artifacts"}),
    "task": frozenset({"name", "version", "description", "authors", "keywords"}),
    "agent": frozenset({"timeout_sec", "user", "network_mode", "allowed_hosts"}),
    "verifier": frozenset({"timeout_sec", "env", "user", "network_mode", "allowed_hosts", "environment_mode",
                           "environment", "collect"}),
    "environment": frozenset({"build_timeout_sec", "docker_image", "os", "cpus", "memory_mb", "storage_mb", "memory",
                              "storage", "gpus", "gpu_types", "tpu", "mcp_servers", "env", "skills_dir",
                              "healthcheck", "workdir", "allow_internet", "network_mode", "allowed_hosts"}),
    "solution": frozenset({"env"}),
    "environment.healthcheck": frozenset({"command", *HEALTHCHECK}),
    "verifier.environment": frozenset({"build_timeout_sec", "docker_image", "os", "cpus", "memory_mb", "storage_mb",
                                       "memory", "storage", "gpus", "gpu_types", "tpu", "env", "workdir",
                                       "allow_internet", "network_mode", "allowed_hosts", "healthcheck", "mcp_servers",
                                       "skills_dir"}),
}
TYPO_CUTOFF = 0.8  # difflib's ratio above which an unknown name is taken for a typo of a known one
TEMPLATE = re.compile(r"\$\{([^}:]+)(?::-(.*))?\}")  # ${VAR} or ${VAR:-default}, resolved from this machine


class Unsupported(Exception):
    """A field that changes how the task runs, which we can't honour here: the message names it."""


class Malformed(Exception):
    """task.toml can't be read, or a field has the wrong shape: the message names it."""


def read_config(text: str) -> tuple[dict[str, Any], list[str]]:
    """What the harness needs of a task.toml (timeouts, resources, network, variables, working
    directory, healthcheck, prebuilt image), and a warning line per key Harbor would not know."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise Malformed(f"task.toml is not valid TOML: {exc}") from None
    tables = {name: _table(data, name) for name in KNOWN if name}
    _refuse_unsupported(data, tables)
    environment, verifier, agent = tables["environment"], tables["verifier"], tables["agent"]
    settings = {
        "agent_timeout": _seconds(agent.get("timeout_sec"), AGENT_TIMEOUT, "[agent] timeout_sec"),
        "verifier_timeout": _seconds(verifier.get("timeout_sec"), VERIFIER_TIMEOUT, "[verifier] timeout_sec"),
        "build_timeout": _seconds(environment.get("build_timeout_sec"), BUILD_TIMEOUT, "[environment] build_timeout_sec"),
        "verifier_env": _env(verifier.get("env"), "[verifier] env"),
        # who the agent (and the solution) and the verifier run as: None, the image's USER, as in Harbor
        "agent_user": _user(agent.get("user"), "[agent] user"),
        "verifier_user": _user(verifier.get("user"), "[verifier] user"),
        **_verifier_environment(verifier, tables["verifier.environment"]),
        "solution_env": _literal(_env(tables["solution"].get("env"), "[solution] env")),
        "env": _env(environment.get("env"), "[environment] env"),
        "cpus": _cpus(environment.get("cpus")),
        "memory_mb": _size(environment, "memory", MEMORY_MB),
        "storage_mb": _size(environment, "storage", STORAGE_MB),
        "workdir": _workdir(environment.get("workdir")),
        "docker_image": _text(environment.get("docker_image"), "[environment] docker_image"),
        "healthcheck": _healthcheck(tables["environment.healthcheck"]) if "healthcheck" in environment else None,
        "mcp_servers": _mcp_servers(environment.get("mcp_servers")),
        "skills_dir": _absolute(environment.get("skills_dir"), "[environment] skills_dir"),
        "artifacts": _artifacts(data.get("artifacts"), "artifacts"),
        "steps": _steps(data.get("steps")),
        "reward_strategy": _reward_strategy(data.get("multi_step_reward_strategy")),
        **_network(environment, verifier, agent),
    }
    return settings, _unknown_keys(data, tables)


MCP_TRANSPORTS = {"streamable-http": "streamable-http", "http": "streamable-http", "sse": "sse"}
STEP_KEYS = frozenset({"name", "agent", "verifier", "min_reward", "healthcheck", "artifacts"})
STEP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _mcp_servers(value: Any) -> list[dict[str, str]]:
    """[[environment.mcp_servers]]: servers the agent reaches over HTTP (a service's URL; Harbor's
    default transport is sse). A server the agent would start itself (stdio) is not supported."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise Malformed("task.toml's [[environment.mcp_servers]] must be an array of tables")
    servers = []
    for server in value:
        name, url = server.get("name"), server.get("url")
        transport = str(server.get("transport", "sse"))
        if not isinstance(name, str) or not name.strip():
            raise Malformed("task.toml's [[environment.mcp_servers]] needs a `name` for each server")
        if transport == "stdio":
            raise Unsupported(f"task.toml's MCP server {name!r} runs over stdio (a process of the agent's); only servers "
                              "reached by URL (streamable-http, sse) are supported here")
        if transport not in MCP_TRANSPORTS:
            raise Malformed(f"task.toml's MCP server {name!r}: transport must be streamable-http, http or sse, not "
                            f"{transport!r}")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise Malformed(f"task.toml's MCP server {name!r} needs a `url` (http://SERVICE:PORT/...)")
        if server.get("headers"):
            raise Unsupported(f"task.toml's MCP server {name!r} has headers, which are not supported here")
        servers.append({"name": name.strip(), "transport": MCP_TRANSPORTS[transport], "url": url})
    return servers


def _absolute(value: Any, key: str) -> str | None:
    text = _text(value, key)
    if text is not None and not text.startswith("/"):
        raise Malformed(f"task.toml's {key} must be an absolute path in the container, not {text!r}")
    return text


def _artifacts(value: Any, key: str) -> list[dict[str, Any]]:
    """What is copied out of the agent's container after the agent: a path (file or folder), or a
    table {source, destination, exclude}. `service` (another container's files) is not supported."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise Malformed(f"task.toml's {key} must be an array of paths or tables")
    found = []
    for item in value:
        if isinstance(item, str):
            item = {"source": item}
        if not isinstance(item, dict) or not isinstance(item.get("source"), str) or not item["source"].strip():
            raise Malformed(f"task.toml's {key}: each artifact is a path, or a table with a `source` path")
        if item.get("service") not in (None, "main"):
            raise Unsupported(f"task.toml's {key}: an artifact of service {item['service']!r} is not supported here "
                              "(only the agent's container's files are copied out)")
        exclude = item.get("exclude") or []
        if not isinstance(exclude, list) or not all(isinstance(e, str) for e in exclude):
            raise Malformed(f"task.toml's {key}: `exclude` must be an array of patterns")
        found.append({"source": item["source"].strip(), "destination": item.get("destination"), "exclude": exclude})
    return found


def _steps(value: Any) -> list[dict[str, Any]]:
    """[[steps]] of a multi-step task (Harbor's StepConfig): each its name (its folder under
    steps/), agent and verifier timeouts, verifier env, min_reward, healthcheck and artifacts."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise Malformed("task.toml's [[steps]] must be an array of tables")
    steps, names = [], set()
    for number, table in enumerate(value, 1):
        name = table.get("name")
        if not isinstance(name, str) or not STEP_NAME.fullmatch(name):
            raise Malformed(f"task.toml's step {number} needs a `name` (its folder under steps/), not {name!r}")
        if name in names:
            raise Malformed(f"task.toml's steps have the name {name!r} twice")
        names.add(name)
        where = f"[[steps]] {name}"
        agent, verifier = _sub(table, "agent", where), _sub(table, "verifier", where)
        step: dict[str, Any] = {
            "name": name,
            "agent_timeout": _seconds(agent.get("timeout_sec"), 0.0, f"{where} agent timeout_sec") or None,
            # Harbor 0.26 (trial.py, _step_verifier_timeout_sec): the step's own, else its default of 600 s
            "verifier_timeout": _seconds(verifier.get("timeout_sec"), VERIFIER_TIMEOUT, f"{where} verifier timeout_sec"),
            "verifier_env": _env(verifier.get("env"), f"{where} verifier env"),
            "min_reward": _min_reward(table.get("min_reward"), where),
            "healthcheck": _healthcheck(_sub(table, "healthcheck", where)) if "healthcheck" in table else None,
            "artifacts": _artifacts(table.get("artifacts"), f"{where} artifacts"),
            "warnings": [f"task.toml: unknown key `{key}` in {where}, ignored (as Harbor ignores it): did you mean `{meant}`?"
                         for key in sorted(set(table) - STEP_KEYS) if (meant := typo_of(key, STEP_KEYS))],
        }
        if verifier.get("environment_mode") == "separate" or "environment" in verifier:
            raise Unsupported(f"task.toml's {where} verifier environment (a separate verifier per step) is not "
                              "supported here: give the task's [verifier] one")
        for section, known in (("agent", KNOWN["agent"]), ("verifier", KNOWN["verifier"])):
            step[f"{section}_user"] = _user(_sub(table, section, where).get("user"), f"{where} {section} user")
            step["warnings"] += [f"task.toml: unknown key `{key}` in {where}'s {section}, ignored: did you mean `{meant}`?"
                                 for key in sorted(set(_sub(table, section, where)) - known)
                                 if (meant := typo_of(key, known))]
        steps.append(step)
    return steps


def _sub(table: dict[str, Any], name: str, where: str) -> dict[str, Any]:
    value = table.get(name, {})
    if not isinstance(value, dict):
        raise Malformed(f"task.toml's {where} `{name}` must be a table")
    return value


def _min_reward(value: Any, where: str) -> dict[str, float] | None:
    """A number gates the `reward` key; a table each key it names (Harbor's StepConfig.min_reward)."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return {"reward": float(value)}
    if isinstance(value, dict) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value.values()):
        return {str(k): float(v) for k, v in value.items()}
    raise Malformed(f"task.toml's {where} min_reward must be a number or a table of numbers")


def _reward_strategy(value: Any) -> str:
    if value is None:
        return "mean"
    if value not in ("mean", "final"):
        raise Malformed(f"task.toml's multi_step_reward_strategy must be \"mean\" or \"final\", not {value!r}")
    return str(value)


def resolve(env: dict[str, str], allowed: Collection[str] = ()) -> dict[str, str]:
    """Variables with their `${VAR}` and `${VAR:-default}` templates taken from this machine's
    environment when the task runs (as Harbor does; never stored), but only the variables in
    `allowed`: any other template takes its default, or nothing (a task that needs one is refused
    before it runs: `host_variables`)."""
    resolved = {}
    for name, value in env.items():
        found = TEMPLATE.fullmatch(value)
        if found is None:
            resolved[name] = value
        elif found.group(1) in allowed and found.group(1) in os.environ:
            resolved[name] = os.environ[found.group(1)]
        else:
            resolved[name] = found.group(2) or ""
    return resolved


def host_variables(meta: Mapping[str, Any]) -> dict[str, tuple[str, bool]]:
    """The variables of this machine a Harbor task's templates name: VAR -> (where, whether the
    template gives a default), from its environment's, verifier's and steps' env and its services'."""
    tables = [("task.toml's [environment] env", meta.get("env") or {}),
              ("task.toml's [verifier] env", meta.get("verifier_env") or {})]
    tables += [(f"task.toml's [[steps]] {step['name']} verifier env", step.get("verifier_env") or {})
               for step in meta.get("steps") or []]
    tables += [(f"environment/docker-compose.yaml's service {service['name']}'s environment", service.get("environment") or {})
               for service in meta.get("services") or []]
    found: dict[str, tuple[str, bool]] = {}
    for where, env in tables:
        for name, value in env.items():
            template = TEMPLATE.fullmatch(str(value))
            if template is not None:
                var, has_default = template.group(1), template.group(2) is not None
                if var not in found or (found[var][1] and not has_default):
                    found[var] = (f"{where} `{name}`", has_default)
    return found


def host_refusal(meta: Mapping[str, Any], allowed: Collection[str]) -> str | None:
    """Why a Harbor task can't take what its templates ask of this machine, in one line; None when
    it can. A variable not in `allowed` is never read (a downloaded task must not hand a provider's
    key to its agent or its services): one without a default refuses the task; an allowed one
    without a default must be set."""
    for var, (where, has_default) in sorted(host_variables(meta).items()):
        if var not in allowed and not has_default:
            return (f"{where} takes ${{{var}}} from this machine, which this task set does not allow: "
                    f"allow it with `host_env = [\"{var}\"]` in its [[tasks]] (tasks check and tasks shell: "
                    f"--host-env {var}), or remove it")
        if var in allowed and not has_default and var not in os.environ:
            return f"{where} needs the variable {var} set on this machine: export it, then run again"
    return None


def _table(data: dict[str, Any], name: str) -> dict[str, Any]:
    outer, _, inner = name.partition(".")
    value = data.get(outer, {})
    if inner and isinstance(value, dict):
        value = value.get(inner, {})
    if not isinstance(value, dict):
        raise Malformed(f"task.toml's `{name}` must be a table, not {type(value).__name__}")
    return value


def _refuse_unsupported(data: dict[str, Any], tables: dict[str, dict[str, Any]]) -> None:
    environment, verifier = tables["environment"], tables["verifier"]
    checks = [
        (bool(verifier.get("collect")), "[[verifier.collect]] (commands in compose services) is not supported here"),
        (str(environment.get("os", "linux")).lower() != "linux", f"[environment] os = {environment.get('os')!r}: "
                                                                 "only Linux containers run here"),
        (_count(environment.get("gpus"), "[environment] gpus") > 0, "[environment] `gpus` is not supported here (no GPU)"),
        (environment.get("tpu") is not None, "[environment] `tpu` is not supported here (no TPU)"),
    ]
    for refused, why in checks:
        if refused:
            raise Unsupported(f"task.toml's {why}")


def _unknown_keys(data: dict[str, Any], tables: dict[str, dict[str, Any]]) -> list[str]:
    """A warning per unknown key that is a likely typo of one Harbor knows; others (a corpus's own
    tables and keys: `[reference_pattern]`, `[tb]`) are ignored in silence, as Harbor ignores them."""
    warnings = []
    for name, known in KNOWN.items():
        table = data if not name else tables[name]
        for key in sorted(set(table) - known):
            meant = typo_of(key, known)
            if meant is None:
                continue
            table_key = not name and isinstance(table[key], dict)
            place = f"table [{key}]" if table_key else f"key `{key}`" + (f" in [{name}]" if name else "")
            warnings.append(f"task.toml: unknown {place}, ignored (as Harbor ignores it): "
                            f"did you mean {f'[{meant}]' if table_key else f'`{meant}`'}?")
    return warnings


def typo_of(key: str, known: Collection[str]) -> str | None:
    """The name Harbor knows that `key` is likely a typo of (close in spelling: `[verifer]`,
    `timout_sec`, `[agent2]`), or None."""
    found = difflib.get_close_matches(key.lower(), sorted(known), n=1, cutoff=TYPO_CUTOFF)
    return found[0] if found else None


def _verifier_environment(verifier: dict[str, Any], environment: dict[str, Any]) -> dict[str, Any]:
    """Harbor's verifier environment: "shared" (the agent's container) or "separate" (a container of
    its own, the agent's artifacts carried into it); separate when a [verifier.environment] table is
    given and no mode is. Its image: tests/Dockerfile, else its `docker_image`, else the task's own."""
    mode = verifier.get("environment_mode")
    if mode not in (None, "shared", "separate"):
        raise Malformed(f"task.toml's [verifier] environment_mode must be \"shared\" or \"separate\", not {mode!r}")
    given = "environment" in verifier
    if mode == "shared" and given:
        raise Malformed("task.toml's [verifier] environment_mode = \"shared\" takes no [verifier.environment] table: "
                        "the verifier runs in the agent's container")
    return {"verifier_separate": mode == "separate" or (mode is None and given),
            "verifier_docker_image": _text(environment.get("docker_image"), "[verifier.environment] docker_image"),
            "verifier_workdir": _workdir(environment.get("workdir")),
            "verifier_environment_env": _env(environment.get("env"), "[verifier.environment] env")}


USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?")  # Docker's user[:group] forms


def _user(value: Any, key: str) -> str | None:
    """A user as Harbor takes it (a name or a UID; Docker's `user:group` too), or None: the image's."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str) or not USER.fullmatch(str(value)) \
            or (isinstance(value, int) and value < 0):
        raise Malformed(f"task.toml's {key} must be a user name or a UID, not {value!r}")
    return str(value)


def _seconds(value: Any, default: float, key: str) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise Malformed(f"task.toml's {key} must be a positive number of seconds, not {value!r}")
    return float(value)


def _count(value: Any, key: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Malformed(f"task.toml's {key} must be a whole number, not {value!r}")
    return value


def _cpus(value: Any) -> float:
    if value is None:
        return 1.0
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise Malformed(f"task.toml's [environment] cpus must be a positive number, not {value!r}")
    return float(value)


def _text(value: Any, key: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise Malformed(f"task.toml's {key} must be a text, not {value!r}")
    return value


def _workdir(value: Any) -> str | None:
    text = _text(value, "[environment] workdir")
    if text is not None and not text.startswith("/"):
        raise Malformed(f"task.toml's [environment] workdir must be an absolute path, not {text!r}")
    return text


def _env(value: Any, key: str) -> dict[str, str]:
    """A table of variables, its `${VAR}` templates kept (`host_refusal` checks them against what
    the task set allows, `resolve` fills them when the task runs)."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str | int | float) for v in value.values()):
        raise Malformed(f"task.toml's {key} must be a table of texts")
    return {str(k): str(v) for k, v in value.items()}


def _literal(env: dict[str, str]) -> dict[str, str]:
    """[solution] env without templates: the oracle's action is stored, and a value from this
    machine (a key) would be stored with it."""
    for name, text in env.items():
        if TEMPLATE.fullmatch(text):
            raise Unsupported(f"task.toml's [solution] env `{name}` = \"{text}\": a value from this machine would be "
                              "stored with the oracle's action; give the value itself")
    return env


def _size(environment: dict[str, Any], name: str, default: int) -> int:
    """A size in MB: `memory_mb = 2048`, or the deprecated `memory = "2G"` (both must agree)."""
    key = f"{name}_mb"
    given = environment.get(key)
    if given is not None and (isinstance(given, bool) or not isinstance(given, int) or given <= 0):
        raise Malformed(f"task.toml's [environment] {key} must be a positive whole number of MB, not {given!r}")
    text = environment.get(name)
    if text is None:
        return int(given) if given is not None else default
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([GMK])B?\s*", str(text).upper())
    if not found:
        raise Malformed(f"task.toml's [environment] {name} = {text!r}: expected a size such as \"2G\" or \"512M\"")
    size = int(float(found.group(1)) * {"G": 1024, "M": 1, "K": 1 / 1024}[found.group(2)])
    if given is not None and given != size:
        raise Malformed(f"task.toml's [environment] {name} = {text!r} ({size} MB) and {key} = {given} disagree")
    return size


def _healthcheck(table: dict[str, Any]) -> dict[str, Any]:
    command = table.get("command")
    if not isinstance(command, str) or not command.strip():
        raise Malformed("task.toml's [environment.healthcheck] needs a `command` (a shell command; exit 0 is healthy)")
    check: dict[str, Any] = {"command": command}
    for key, default in HEALTHCHECK.items():
        value = table.get(key, default)
        if key == "retries":
            check[key] = max(_count(value, f"[environment.healthcheck] {key}"), 1)
        elif value == 0 and key == "start_period_sec":
            check[key] = 0.0
        else:
            check[key] = _seconds(value, default, f"[environment.healthcheck] {key}")
    return check


def _network(environment: dict[str, Any], verifier: dict[str, Any], agent: dict[str, Any]) -> dict[str, Any]:
    """Whether the task asks for the internet (its environment, its agent or its verifier: Harbor's
    default is public), and the hosts of an allowlist, which nothing here can enforce."""
    modes = []
    for section, table in (("environment", environment), ("agent", agent), ("verifier", verifier)):
        mode = table.get("network_mode")
        if mode is None and section == "environment":
            legacy = table.get("allow_internet")
            if legacy is not None and not isinstance(legacy, bool):
                raise Malformed(f"task.toml's [environment] allow_internet must be true or false, not {legacy!r}")
            mode = "public" if legacy in (None, True) else "no-network"
        if mode is None:
            continue
        if mode not in NETWORK_MODES:
            raise Malformed(f"task.toml's [{section}] network_mode = {mode!r}: one of {', '.join(NETWORK_MODES)}")
        modes.append(mode)
    hosts = sorted({str(h) for t in (environment, agent, verifier) for h in (t.get("allowed_hosts") or [])})
    return {"allow_internet": any(mode != "no-network" for mode in modes),
            "allowed_hosts": hosts if "allowlist" in modes else []}
