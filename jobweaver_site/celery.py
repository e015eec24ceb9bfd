"""The reference site's Celery app: JobWeaver's own (jobweaver.celery), exposed here for
`celery -A jobweaver_site` and the tools that expect a project module."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jobweaver_site.settings")

from jobweaver.celery import app

__all__ = ["app"]
