"""Pieces every app shares and that know no app: the domain's error hierarchy, time formatting,
database-outage handling, Kafka topic names and the event producer, admin helpers.

Apps import from here, never from `jobweaver_site` (the settings package sits on top of the apps
and reaches them only through Django settings).
"""
