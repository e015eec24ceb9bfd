"""The import package `jobweaver` is built from `apps/` (ARCHITECTURE §14): setuptools maps the
directory onto the name; its subpackages are listed here because `find_packages` cannot rename
them. Everything else about the distribution is in pyproject.toml."""

from setuptools import find_packages, setup

setup(
    package_dir={"jobweaver": "apps"},
    packages=["jobweaver"]
    + [
        f"jobweaver.{name}"
        for name in find_packages("apps", exclude=["*.tests", "*.tests.*", "tests"])
    ],
    package_data={"jobweaver": ["*/templates/**/*", "*/static/**/*"]},
)
