# The JobWeaver application image: one image for every role in compose.yaml (migrate, web,
# scheduler, executor, beat); the service's command picks the role.
# Build the two wheels (django-jobweaver from apps/, kombu-kafka from kombu_kafka/); the image
# installs them, never the source tree or the dev lock's test and lint tools.
FROM python:3.11-slim AS wheels
WORKDIR /src
COPY pyproject.toml setup.py README.md LICENSE ./
COPY apps ./apps
COPY kombu_kafka ./kombu_kafka
RUN pip wheel --no-cache-dir --no-deps -w /wheels . ./kombu_kafka

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DJANGO_SETTINGS_MODULE=jobweaver_site.settings

WORKDIR /app

# JobWeaver with the site's extras, at the versions of the dev lock (requirements.txt as
# constraints, extras stripped as pip requires: it pins, it adds nothing). confluent-kafka and
# psycopg[binary] ship manylinux wheels: no compiler or librdkafka needed.
COPY requirements.txt ./
COPY --from=wheels /wheels /wheels
RUN sed 's/\[[^]]*\]//' requirements.txt > /tmp/constraints.txt \
    && pip install --find-links /wheels -c /tmp/constraints.txt "django-jobweaver[site,otel]" \
    && rm -rf /wheels /tmp/constraints.txt

# Only the reference site: never the venv, local data, or a developer's .env (DJANGO_DEBUG=1).
COPY manage.py ./
COPY jobweaver_site ./jobweaver_site
COPY templates ./templates
# The admin's static files, served by WhiteNoise from the web process (DEBUG off).
RUN DJANGO_SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput

# The processes write nothing to disk (beat keeps its schedule in PostgreSQL).
RUN useradd --system --uid 10001 --no-create-home jobweaver
USER jobweaver

EXPOSE 8000
ENV JOBWEAVER_WEB_BIND=0.0.0.0:8000
CMD ["gunicorn", "-c", "jobweaver_site/gunicorn.conf.py", "jobweaver_site.wsgi"]
