"""python manage.py runworker [--queues a,b] [--concurrency N] [--burst]"""

import logging
import sys

from django.core.management.base import BaseCommand, CommandError

from jobs.application.schedules import sync_schedules
from jobs.application.worker import Worker
from jobs.checks import autovacuum_problems


class Command(BaseCommand):
    help = "Run a worker: claim due jobs and run them until SIGTERM/SIGINT (or, with --burst, until none are due)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--queues", default="", help="comma-separated queue names (default: all queues)")
        parser.add_argument("--concurrency", type=int, default=None, help="executor threads (default JOB_CONCURRENCY)")
        parser.add_argument("--burst", action="store_true", help="run what is due, then exit")

    def handle(self, *args, queues: str, concurrency: int | None, burst: bool, **options) -> None:
        names = [q.strip() for q in queues.split(",") if q.strip()]
        if concurrency is not None and concurrency < 1:
            raise CommandError("--concurrency must be at least 1")
        sync_schedules()
        for problem in autovacuum_problems():  # the deploy check, said where an operator looks: the worker's log
            logging.getLogger("relay.worker").warning("%s (%s) %s", problem.msg, problem.id, problem.hint)
        code = Worker(queues=names or None, concurrency=concurrency, burst=burst).run()
        sys.exit(code)
