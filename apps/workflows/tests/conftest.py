"""The fixture a host project gets with `pytest_plugins = ["jobweaver.testing"]`."""

from jobweaver.testing import jobweaver_eager  # noqa: F401
