from jobweaver_site.celery import app as celery_app

__all__ = ("celery_app",)
