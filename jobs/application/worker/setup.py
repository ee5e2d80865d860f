"""What a worker starts before its executors: the listeners (LISTEN/NOTIFY wake-ups) and the maintenance
services (`jobs.application.maintenance`), which it only starts and stops.

The accounts' limits are repaired before the first claim (a crash between two databases' commits is
healed), in that service's own thread: the main thread holds no connection.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from django.db import connections

from jobs.application import notifications
from jobs.application.config import QUEUE_STATEMENT_TIMEOUT
from jobs.application.maintenance.cron import CronFiring
from jobs.application.maintenance.limits import LimitsRepair
from jobs.application.maintenance.metrics import MetricsFlush
from jobs.application.maintenance.outbox import OutboxMover, outboxes_to_move
from jobs.application.maintenance.rescue import LeaseRescue
from jobs.application.maintenance.service import MaintenanceService
from jobs.application.maintenance.vacuum import QueueVacuuming
from jobs.application.worker.state import WorkerState
from jobs.infrastructure.listener import NotificationListener
from jobs.infrastructure.outbox import OUTBOX_CHANNEL

log = logging.getLogger("relay.worker")


@dataclass
class Services:
    """What runs beside the executors; the shutdown stops it."""

    listeners: list[NotificationListener] = field(default_factory=list)
    maintenance: list[MaintenanceService] = field(default_factory=list)  # stopped when the executors have
    metrics: MetricsFlush | None = None  # stopped last: its final flush counts the last acknowledgements
    outbox_wake: threading.Event = field(default_factory=threading.Event)  # a caller's outbox rows committed


def start_services(state: WorkerState, services: Services) -> None:
    """Start the listeners and the maintenance services."""
    databases = (state.using, state.handler_using)
    every = max(0.5, state.config.poll_interval)
    repair = LimitsRepair(databases=databases)
    repair.start()
    repair.first_pass.wait(QUEUE_STATEMENT_TIMEOUT)
    services.maintenance.append(repair)
    outboxes = state.outboxes = outboxes_to_move(state.using, state.handler_using)
    if not state.burst:
        start_listeners(state, services)
        services.maintenance += [
            OutboxMover(alias=alias, using=state.using, wake=services.outbox_wake, every=state.config.poll_interval)
            for alias in outboxes
        ]
    log.info(
        "worker %s started: queues=%s concurrency=%d burst=%s",
        state.worker_id,
        ",".join(state.queues) if state.queues else "all",
        state.concurrency,
        state.burst,
    )
    services.maintenance += [
        LeaseRescue(using=state.using, handler_using=state.handler_using, every=every),
        CronFiring(using=state.using, every=every, databases=databases),
    ]
    if state.config.vacuum and not state.burst and connections[state.using].vendor == "postgresql":
        services.maintenance.append(QueueVacuuming(using=state.using, outboxes=outboxes))
    services.metrics = MetricsFlush(
        using=state.using,
        worker_id=state.worker_id,
        interval=state.config.metrics_interval,
        every=every,
        databases=databases,
    )
    for service in [*services.maintenance, services.metrics]:
        service.start()


def start_listeners(state: WorkerState, services: Services) -> None:
    """LISTEN for committed enqueues on the queue's database, and for the apps' channels on `default`
    (where their changes commit): one connection when the queue shares `default`, two when it is apart."""
    queue_connection, apps_connection = connections[state.using], connections[state.handler_using]
    shared = state.using == state.handler_using
    outbox_wake = services.outbox_wake
    if queue_connection.vendor == "postgresql":
        services.listeners.append(
            NotificationListener(
                queue_connection,
                state.queues,
                on_wake=state.wake.wake,
                on_connect=state.wake.wake_all,
                channels=notifications.registered_channels() if shared else (),
                on_channel=notifications.deliver,
                on_listening=notifications.set_listening if shared else (lambda active: None),
            )
        )
    if not shared and apps_connection.vendor == "postgresql":
        services.listeners.append(
            NotificationListener(
                apps_connection,
                None,
                on_wake=lambda count: outbox_wake.set(),
                on_connect=outbox_wake.set,
                channels=notifications.registered_channels(),
                on_channel=notifications.deliver,
                on_listening=notifications.set_listening,
                wake_channel=OUTBOX_CHANNEL,  # a job committed to default's outbox: move it
            )
        )
    for listener in services.listeners:
        listener.start()
