# The JobWeaver application image: one image for every role in compose.yaml (migrate, web,
# scheduler, executor, beat); the service's command picks the role.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DJANGO_SETTINGS_MODULE=jobweaver_site.settings

WORKDIR /app

# Dependencies first, so a code change does not reinstall them. confluent-kafka and
# psycopg[binary] ship manylinux wheels: no compiler or librdkafka needed.
COPY requirements.txt ./
RUN pip install -r requirements.txt

# Only the application: never the venv, local data, or a developer's .env (DJANGO_DEBUG=1).
COPY manage.py ./
COPY jobweaver_site ./jobweaver_site
COPY apps ./apps
COPY kombu_kafka ./kombu_kafka
COPY templates ./templates
# The admin's static files, served by WhiteNoise from the web process (DEBUG off).
RUN DJANGO_SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput

# The processes write nothing to disk (beat keeps its schedule in PostgreSQL).
RUN useradd --system --uid 10001 --no-create-home jobweaver
USER jobweaver

EXPOSE 8000
ENV JOBWEAVER_WEB_BIND=0.0.0.0:8000
CMD ["gunicorn", "-c", "jobweaver_site/gunicorn.conf.py", "jobweaver_site.wsgi"]
