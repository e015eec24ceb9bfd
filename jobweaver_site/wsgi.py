import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jobweaver_site.settings")
application = get_wsgi_application()

# OpenTelemetry export when OTEL_EXPORTER_OTLP_ENDPOINT is set (a no-op otherwise).
from jobweaver.core import tracing  # noqa: E402

tracing.configure("web")
