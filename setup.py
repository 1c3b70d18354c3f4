"""Maps msdb's four top-level folders onto one namespaced distribution (docs/architecture.md, "Parts").

pyproject.toml holds the metadata; this file only computes the package list so that a new
subpackage in any folder is picked up without editing a hand-kept list.
"""

from setuptools import find_packages, setup

ROOTS = {"msdb": "msdb", "msdb.tuner": "tuner", "msdb.cli": "cli", "msdb.schema": "schema"}


def _packages() -> tuple[list[str], dict[str, str]]:
    packages: list[str] = []
    package_dir: dict[str, str] = {}
    for name, folder in ROOTS.items():
        packages.append(name)
        package_dir[name] = folder
        for sub in find_packages(where=folder):
            packages.append(f"{name}.{sub}")
    return packages, package_dir


PACKAGES, PACKAGE_DIR = _packages()
setup(packages=PACKAGES, package_dir=PACKAGE_DIR, package_data={"msdb": ["py.typed"], "msdb.schema": ["*.mako", "versions/*.py"]})
