"""The queue's database in tests: `connection` and `atomic` for the queue's own statements, whether the queue
shares `default` or has a database of its own (JOBS_DATABASE_URL)."""

from django.db import connections
from django.utils.connection import ConnectionProxy

from jobs.infrastructure.database import queue_atomic, queue_database

connection = ConnectionProxy(connections, queue_database())  # this thread's connection to the queue's database
atomic = queue_atomic
