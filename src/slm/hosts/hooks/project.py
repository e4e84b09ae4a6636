"""The project a host session works in, and whether it opted out. ``os`` only (the thin
hook imports it).

A project is the realpath of the git work tree holding the session's ``cwd`` (the nearest
folder above it with a ``.git``), else of ``cwd`` itself. Its memories carry it under the
``project`` metadata key, a scope key by default (docs/scopes.md), so that two projects'
memories are never one memory, never linked, and a recall for one project asks for its
project only. A project opts out with a file ``.slm-ignore`` in its root (or in ``cwd``).
"""

from __future__ import annotations

import os

#: The metadata key that holds a memory's project.
PROJECT_KEY = "project"
#: A file in a project that turns the hooks off for it.
OPT_OUT_FILE = ".slm-ignore"


def project_of(cwd: str) -> str:
    """The project folder of ``cwd`` (absolute, symlinks resolved)."""
    here = folder = os.path.realpath(cwd)
    while True:
        if os.path.exists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return here
        folder = parent


def opted_out(cwd: str, project: str) -> bool:
    """Whether the project (or the folder the session runs in) holds ``.slm-ignore``."""
    return any(os.path.exists(os.path.join(p, OPT_OUT_FILE)) for p in {cwd, project})
