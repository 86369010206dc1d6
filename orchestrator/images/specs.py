"""The images this project builds, one spec each, and the order to build them in.

Every image is `intercode/<name>:latest` and ultimately FROM the base image. Build contexts hold
the Dockerfile at their root, the in-container driver under `driver/`, the listed project files
under their path relative to `images/`, and the listed data files under `data/` (the `data/`
directory is always present, possibly empty). Data paths are relative to the data directory and
listed one by one on purpose: what goes into an image should be readable here.

Tasks of your own bring their images (orchestrator/tasksets/resolve.py registers them with `register`):
the user's Dockerfile with its directory as the whole build context (`context_dir`), then our
layer over it (`own_layer`): the driver and the pristine snapshot, which their Dockerfile never
mentions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from foundation.errors import ImageError
from foundation.settings import PROJECT_ROOT

IMAGES_DIR = PROJECT_ROOT / "images"
DRIVER = PROJECT_ROOT / "icdriver"  # the driver package, shipped as one zipapp: driver/icdriver.pyz
BASE_IMAGE = "debian:bookworm-slim"
REPOSITORY = "intercode"


def _frozen(mapping: Mapping[str, str] | None = None) -> Mapping[str, str]:
    return MappingProxyType(dict(mapping or {}))


# An image made from a user's task folder or file names it here, and so do the images built FROM it:
# what the test suite's clean-up tells the images it made by.
SOURCE_LABEL = "intercode.source"


@dataclass(frozen=True)
class ImageSpec:
    name: str
    dockerfile: str  # relative to images/
    files: tuple[str, ...] = ()  # project files (relative to images/) the Dockerfile COPYs
    data: Mapping[str, str] = field(default_factory=_frozen)  # context path under data/ -> data-dir path
    exclude: tuple[str, ...] = ()  # names skipped anywhere inside data directories
    buildargs: Mapping[str, str] = field(default_factory=_frozen)
    parent: str | None = None  # the spec this image is FROM; None means BASE_IMAGE
    workdir: str = "/"  # must match the Dockerfile's WORKDIR; agents start here
    context_dir: Path | None = None  # a user's directory, the whole context (`dockerfile` relative to it)
    timeout: float | None = None  # seconds the build may take (a user's task says; ours: no limit)
    stages: tuple[str, ...] = ()  # other specs the Dockerfile copies from (`FROM ... AS`): built first
    prebuilt: str | None = None  # an image the engine may have already (a Harbor task's docker_image): used if so
    companions: tuple[str, ...] = ()  # specs whose containers run beside this image's (a task's services): built first
    source: Path | None = None  # the user's task folder or file it is made from (SOURCE_LABEL)
    parent_user: bool = False  # the parent image's USER is passed to the build as IC_USER (our layer keeps it)

    @property
    def labels(self) -> dict[str, str]:
        """Labels the build gives the image, beside its inputs' hash and name."""
        return {SOURCE_LABEL: str(self.source)} if self.source is not None else {}

    @property
    def tag(self) -> str:
        return f"{REPOSITORY}/{self.name}:latest"

    @property
    def dockerfile_path(self) -> Path:
        return (self.context_dir or IMAGES_DIR) / self.dockerfile

    @property
    def dockerfile_in_context(self) -> str:
        """Where the Dockerfile is in the build context."""
        return self.dockerfile if self.context_dir is not None else "Dockerfile"


COMMIT_ROOT = "common/commit-root.sh"
REDATE = "common/redate.py"  # file systems dated as if made at build, as the original's were

_NL2BASH_FS = {1: "nl2bash/fs/fs_1.tar", 2: "nl2bash/fs/fs_2.tar", 3: "nl2bash/fs/fs_3.tar",
               4: None}  # file system 4 adds nothing to the base

RUNTIME = "driver-runtime"  # the driver's own Python and bash, copied into every image of a task of yours

SPECS: tuple[ImageSpec, ...] = (
    ImageSpec(RUNTIME, "runtime/Dockerfile", files=("runtime/make-runtime.sh",)),
    ImageSpec("nl2bash-base", "nl2bash-base/Dockerfile", files=(COMMIT_ROOT,)),
    *(ImageSpec(f"nl2bash-fs{n}", "nl2bash/Dockerfile", parent="nl2bash-base", files=(REDATE,),
                data=_frozen({f"fs_{n}.tar": tar} if tar else {}), buildargs=_frozen({"FS": str(n)}))
      for n, tar in _NL2BASH_FS.items()),
    ImageSpec("bash", "bash/Dockerfile", files=(COMMIT_ROOT, REDATE),
              data=_frozen({"test_queries_fs.tar": "nl2bash/fs/test_queries_fs.tar"})),
    ImageSpec("python", "python/Dockerfile"),
    ImageSpec("ctf", "ctf/Dockerfile", files=(COMMIT_ROOT,), data=_frozen({"ctf": "ctf/task_assets"}),
              exclude=("solution",), workdir="/ctf"),
    ImageSpec("sql", "sql/Dockerfile", files=("sql/intercode.cnf", "sql/load-data.sh"),
              data=_frozen({"spider.sql": "sql/spider/ic_spider_dbs.sql",
                            "wikisql.sql": "sql/wikisql/ic_wikisql_dev.sql"})),
    # The project's own starter tasks: no benchmark data needed.
    ImageSpec("starter", "starter/Dockerfile", files=("starter/make-fs.sh", COMMIT_ROOT), parent="nl2bash-base"),
    ImageSpec("sql-starter", "sql/Dockerfile", files=("sql/intercode.cnf", "sql/load-data.sh", "sql-starter/starter.sql"),
              buildargs=_frozen({"DUMPS": "sql-starter/"})),
)
_REGISTERED: dict[str, ImageSpec] = {spec.name: spec for spec in SPECS}
BY_NAME: Mapping[str, ImageSpec] = MappingProxyType(_REGISTERED)  # ours, then those registered since
OWN_LAYER = "own/Dockerfile"


def register(spec: ImageSpec) -> ImageSpec:
    """Make an image of tasks of your own known by name (again: the latest wins)."""
    _REGISTERED[spec.name] = spec
    return spec


def own_layer(name: str, parent: ImageSpec, *, commit_root: bool = False, image_python: bool = False,
              companions: tuple[str, ...] = ()) -> ImageSpec:
    """Our layer over the image `parent` builds: the driver with its own runtime (nothing of the
    image needed), with `commit_root` the root committed to git (the Bash reward diffs with it), and
    the snapshot the reset restores from. `image_python`: the driver, and so the agent's Python
    code, runs on the image's python3 when it has one."""
    runtime = BY_NAME[RUNTIME]
    return ImageSpec(name, OWN_LAYER, files=("own/prepare.sh", COMMIT_ROOT), parent=parent.name,
                     buildargs=_frozen({"BASE": parent.tag, "RUNTIME": runtime.tag,
                                        "IC_COMMIT_ROOT": "1" if commit_root else "0",
                                        "IC_PYTHON": "image" if image_python else "runtime"}),
                     timeout=parent.timeout, stages=(runtime.name,), companions=companions, source=parent.source,
                     parent_user=True)


def get(name: str) -> ImageSpec:
    """The spec for a name (ours, or one registered); `intercode/<name>[:latest]` is accepted too."""
    short = name.removeprefix(f"{REPOSITORY}/").removesuffix(":latest")
    try:
        return BY_NAME[short]
    except KeyError:
        raise ImageError(f"unknown image {name!r}; known images: {', '.join(BY_NAME)}") from None


def needs(spec: ImageSpec) -> tuple[str, ...]:
    """The specs that must be built before `spec`: its parent, the stages it copies from, and its
    companions (an image of its task's that fails to build fails the task)."""
    return (*((spec.parent,) if spec.parent is not None else ()), *spec.stages, *spec.companions)


def in_build_order(names: Iterable[str] | None = None) -> list[ImageSpec]:
    """The named specs (all when None) plus what they need, what is needed first."""
    ordered: list[ImageSpec] = []

    def visit(spec: ImageSpec) -> None:
        if spec in ordered:
            return
        for name in needs(spec):
            visit(BY_NAME[name])
        ordered.append(spec)

    for name in (list(BY_NAME) if names is None else names):
        visit(get(name))
    return ordered
