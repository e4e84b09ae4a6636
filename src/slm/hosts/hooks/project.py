"""The project a host session works in, and whether it opted out. Standard library only.

A project is the realpath of the git work tree holding the session's ``cwd`` (the nearest
folder above it with a ``.git``), else of ``cwd`` itself. Its memories carry it under the
``project`` metadata key, a scope key by default (docs/scopes.md), so that two projects'
memories are never one memory, never linked, and a recall for one project asks for its
project only. A project opts out with a file ``.slm-ignore`` in its root (or in ``cwd``).
"""

from __future__ import annotations

import os
from pathlib import Path

#: The metadata key that holds a memory's project.
PROJECT_KEY = "project"
#: A file in a project that turns the hooks off for it.
OPT_OUT_FILE = ".slm-ignore"


def project_of(cwd: str) -> str:
    """The project folder of ``cwd`` (absolute, symlinks resolved)."""
    here = Path(os.path.realpath(cwd))
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return str(folder)
    return str(here)


def opted_out(cwd: str, project: str) -> bool:
    """Whether the project (or the folder the session runs in) holds ``.slm-ignore``."""
    return any(os.path.exists(os.path.join(p, OPT_OUT_FILE)) for p in {cwd, project})
