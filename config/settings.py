"""Relay settings: twelve-factor, read from the environment through django-environ.

Every value has a default that works on a laptop (SQLite, console email), so
`make run` needs no configuration. Production sets at least SECRET_KEY,
DEBUG=false, ALLOWED_HOSTS and DATABASE_URL. `.env.example` lists them all.
"""

from pathlib import Path
from typing import Any

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
# A .env file in the project folder is read if present; real environment variables win.
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DEBUG = env.bool("DEBUG", default=True)
SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off.")
    # Development only: a fixed key so sessions survive restarts of `make run`.
    SECRET_KEY = "relay-insecure-development-key-do-not-use-in-production"  # noqa: S105

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "config.admin_site.RelayAdminConfig",  # Django's admin, as Relay (its name, the dashboard)
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "accounts",
    "contacts",
    "jobs",
    "workflows",
    "integrations",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "config" / "templates"],  # the admin's Relay branding
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------
# The default is a SQLite file inside the project folder (not the working
# directory), so `manage.py` finds the same database from anywhere.
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}
# The queue in its own PostgreSQL database (README "Scaling out"): JOBS_DATABASE_URL adds the alias `jobs`
# and JOBS_DATABASE names it; the jobs app's tables live there (jobs.infrastructure.database.JobsRouter),
# everything else stays in `default`. Unset, the queue shares `default` and enqueue joins its transactions.
if env.str("JOBS_DATABASE_URL", default=""):
    DATABASES["jobs"] = env.db("JOBS_DATABASE_URL")
JOBS_DATABASE = "jobs" if "jobs" in DATABASES else "default"
DATABASE_ROUTERS = ["jobs.infrastructure.database.JobsRouter"]


def _configure_database(_db: dict) -> None:
    """Connection options shared by every alias (the queue's database gets the same as `default`)."""
    if _db["ENGINE"] != "django.db.backends.sqlite3":
        _db.setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
        _db["CONN_HEALTH_CHECKS"] = True
        # Server-side parameter binding, and statements prepared on a connection after their second use:
        # PostgreSQL then parses and plans the workflow engine's hot statements once per connection, not
        # once per step. Behind PgBouncer in transaction mode (before 1.21, or without
        # max_prepared_statements) set DATABASE_PREPARED_STATEMENTS=false.
        if env.bool("DATABASE_PREPARED_STATEMENTS", default=True):
            _db.setdefault("OPTIONS", {}).update({"server_side_binding": True, "prepare_threshold": 2})


_db = DATABASES["default"]
if _db["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets readers run beside the one writer; IMMEDIATE takes the write
    # lock at BEGIN so two workers never deadlock upgrading a read lock.
    _db.setdefault("OPTIONS", {}).update(
        {
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
    # Tests start real worker processes, which need a file, not :memory:.
    _db["TEST"] = {"NAME": str(BASE_DIR / "test_db.sqlite3")}
for _alias in DATABASES:
    _configure_database(DATABASES[_alias])

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "config" / "static"]

# --- Email ------------------------------------------------------------------
# EMAIL_URL: smtp://user:pass@host:25, smtp+tls://..., smtp+ssl://..., consolemail:// (default).
# Parsed by django-environ, then expressed as Django 6.1's MAILERS.
_email = env.email_url("EMAIL_URL", default="consolemail://")
_smtp_options = {
    "host": _email.get("EMAIL_HOST"),
    "port": _email.get("EMAIL_PORT"),
    "username": _email.get("EMAIL_HOST_USER"),
    "password": _email.get("EMAIL_HOST_PASSWORD"),
    "use_tls": _email.get("EMAIL_USE_TLS"),
    "use_ssl": _email.get("EMAIL_USE_SSL"),
    "timeout": env.float("EMAIL_TIMEOUT", default=10.0),
}
MAILERS = {
    "default": {
        "BACKEND": _email["EMAIL_BACKEND"],
        "OPTIONS": (
            {k: v for k, v in _smtp_options.items() if v not in (None, "")}
            if _email["EMAIL_BACKEND"].endswith("smtp.EmailBackend")
            else {}
        ),
    }
}
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="Relay <relay@localhost>")

# --- Job queue (jobs) ---------------------------------------------------------
# Each JOB_* setting is documented in the README with its default.
JOB_POLL_INTERVAL = env.float("JOB_POLL_INTERVAL", default=1.0)
JOB_EXECUTION_TIMEOUT = env.float("JOB_EXECUTION_TIMEOUT", default=600.0)
JOB_SHUTDOWN_GRACE = env.float("JOB_SHUTDOWN_GRACE", default=30.0)
JOB_MAX_RETRIES = env.int("JOB_MAX_RETRIES", default=3)
JOB_RETRY_DELAY_SECONDS = env.float("JOB_RETRY_DELAY_SECONDS", default=60.0)
JOB_BACKOFF_MAX_SECONDS = env.float("JOB_BACKOFF_MAX_SECONDS", default=3600.0)
JOB_RETRY_JITTER = env.float("JOB_RETRY_JITTER", default=0.25)
JOB_CONCURRENCY = env.int("JOB_CONCURRENCY", default=4)
JOB_BATCH_SIZE = env.int("JOB_BATCH_SIZE", default=100)
JOB_HANDLER_MODULES = env.list("JOB_HANDLER_MODULES", default=[])
JOB_RETENTION_DAYS = env.float("JOB_RETENTION_DAYS", default=7.0)
JOB_DEAD_LETTER_RETENTION_DAYS = env.float("JOB_DEAD_LETTER_RETENTION_DAYS", default=None)
# The gauges of /metrics (jobs due, oldest due, dead letters, ...) are counted by one worker per this many
# seconds across all workers; 0 switches the counts off.
JOB_METRICS_INTERVAL = env.float("JOB_METRICS_INTERVAL", default=30.0)
# The workers vacuum the queue's tables when autovacuum is off or late (jobs.domain.vacuum); False leaves it
# to autovacuum or a cron job.
JOB_VACUUM = env.bool("JOB_VACUUM", default=True)

# --- Metrics (GET /metrics, Prometheus text) -------------------------------------
# Answered only to a request carrying `Authorization: Bearer <METRICS_TOKEN>` and/or coming from an address
# in METRICS_ALLOWED_IPS (addresses or networks, comma-separated); each one set must hold. Neither set: 404.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
METRICS_ALLOWED_IPS = env.list("METRICS_ALLOWED_IPS", default=[])

# Django's own tasks framework runs on Relay's queue: `@task` + `.enqueue()`.
TASKS = {"default": {"BACKEND": "jobs.tasks_backend.RelayTaskBackend"}}

# --- Logging ------------------------------------------------------------------
LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
    },
    # PostgreSQL's DETAIL and CONTEXT lines quote row data: kept out of every log (kernel.log_redaction.py).
    "filters": {"database_details": {"()": "kernel.log_redaction.DatabaseDetailsFilter"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["database_details"]},
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # Django's own handlers (its DEBUG console, mail_admins) would print tracebacks unfiltered.
        "django": {"handlers": ["console"], "level": "INFO", "propagate": False},
    },
}

# --- Integrations (email links, SMS and voice providers, webhooks) ----------------------
# Read by integrations at call time, so tests override them with pytest-django's
# `settings` and worker processes take them from their environment.
# The public address of this Relay: unsubscribe links in email, and the inbound
# SMS URL the provider signs. Set it to the https origin users and providers reach.
RELAY_PUBLIC_URL = env.str("RELAY_PUBLIC_URL", default="http://127.0.0.1:8000")

# SMS and voice: "console" (log only, the development default) or "twilio" (any
# Twilio-compatible REST API at TWILIO_BASE_URL). VOICE_PROVIDER defaults to SMS_PROVIDER.
SMS_PROVIDER = env.str("SMS_PROVIDER", default="console")
VOICE_PROVIDER = env.str("VOICE_PROVIDER", default="")
TWILIO_ACCOUNT_SID = env.str("TWILIO_ACCOUNT_SID", default="")
TWILIO_AUTH_TOKEN = env.str("TWILIO_AUTH_TOKEN", default="")  # also verifies inbound SMS webhooks
TWILIO_FROM_NUMBER = env.str("TWILIO_FROM_NUMBER", default="")  # E.164, e.g. +15550100000
TWILIO_BASE_URL = env.str("TWILIO_BASE_URL", default="https://api.twilio.com")
TWILIO_CONNECT_TIMEOUT = env.float("TWILIO_CONNECT_TIMEOUT", default=5.0)
TWILIO_READ_TIMEOUT = env.float("TWILIO_READ_TIMEOUT", default=15.0)

# Webhooks: signed (Standard Webhooks v1), SSRF-guarded (always on), answers bounded.
WEBHOOK_CONNECT_TIMEOUT = env.float("WEBHOOK_CONNECT_TIMEOUT", default=5.0)
WEBHOOK_READ_TIMEOUT = env.float("WEBHOOK_READ_TIMEOUT", default=15.0)
WEBHOOK_MAX_RESPONSE_BYTES = env.int("WEBHOOK_MAX_RESPONSE_BYTES", default=64 * 1024)  # read at most this much
WEBHOOK_RESPONSE_BODY_CHARS = env.int("WEBHOOK_RESPONSE_BODY_CHARS", default=4096)  # kept in response data
# host or host:port ([v6] or [v6]:port): the only targets let through despite a non-public address.
WEBHOOK_ALLOWED_HOSTS = env.list("WEBHOOK_ALLOWED_HOSTS", default=[])
# Inbound SMS keyword message ids are kept this long, so a replayed request changes nothing
# (docs/decisions/inbound-sms-consent.md).
# Days an email's tracking links (opens, clicks) keep working; an older one answers 404 and records nothing.
RELAY_TRACKING_MAX_AGE_DAYS = env.int("RELAY_TRACKING_MAX_AGE_DAYS", default=365)
INBOUND_SMS_REPLAY_WINDOW_DAYS = env.int("INBOUND_SMS_REPLAY_WINDOW_DAYS", default=365)
WEBHOOK_RETRY_AFTER_MAX_SECONDS = env.float("WEBHOOK_RETRY_AFTER_MAX_SECONDS", default=3600.0)
WEBHOOK_SECRET_ROTATION_GRACE_HOURS = env.float("WEBHOOK_SECRET_ROTATION_GRACE_HOURS", default=24.0)
WEBHOOK_CA_BUNDLE = env.str("WEBHOOK_CA_BUNDLE", default="")  # a CA file for receivers' certificates; "" = certifi
WEBHOOK_USER_AGENT = env.str("WEBHOOK_USER_AGENT", default="Relay-Webhooks/1.0")

# urllib3 logs each request line, path and query included, at DEBUG, and the full URL
# with a receiver's malformed header lines at WARNING: silence it whatever LOG_LEVEL
# says, since a webhook URL's path or query may hold a token. The webhook client and
# the SMS/voice provider log every outcome themselves, with the URL cut to its host.
LOGGING["handlers"]["discard"] = {"class": "logging.NullHandler"}
LOGGING["loggers"]["urllib3"] = {"level": "CRITICAL", "handlers": ["discard"], "propagate": False}

# --- Contact imports (admin: Contacts > Import) ------------------------------------
# A file past one of these is refused at upload with the limit named (README "Importing contacts").
CONTACT_IMPORT_MAX_BYTES = env.int("CONTACT_IMPORT_MAX_BYTES", default=50 * 1024 * 1024)
CONTACT_IMPORT_MAX_ROWS = env.int("CONTACT_IMPORT_MAX_ROWS", default=250_000)  # contacts under the header
CONTACT_IMPORT_MAX_COLUMNS = env.int("CONTACT_IMPORT_MAX_COLUMNS", default=200)
CONTACT_IMPORT_MAX_CELL_CHARS = env.int("CONTACT_IMPORT_MAX_CELL_CHARS", default=10_000)
# The mapping page posts one field per column: Django must take that many fields in one form.
DATA_UPLOAD_MAX_NUMBER_FIELDS = max(1000, CONTACT_IMPORT_MAX_COLUMNS + 100)

# --- REST API ---------------------------------------------------------------------
# /api/v1/ (the api app): bearer tokens (accounts.ApiToken), problem details for
# every error, cursor pagination, per-token throttling. docs/subsystems/api.md.
API_MAX_BODY_BYTES = env.int("API_MAX_BODY_BYTES", default=1024 * 1024)  # larger bodies: 413
API_PAGE_SIZE = env.int("API_PAGE_SIZE", default=50)  # items per page unless ?page_size= says otherwise
API_MAX_PAGE_SIZE = env.int("API_MAX_PAGE_SIZE", default=200)  # ?page_size= above this is capped
API_THROTTLE_RATE = env.str("API_THROTTLE_RATE", default="600/min")  # per token; empty: no limit

# The throttle counts live here: per process by default; point CACHE_URL at a
# shared cache (e.g. dbcache://relay_cache after `manage.py createcachetable`)
# when several web processes serve the API.
CACHES = {"default": env.cache_url("CACHE_URL", default="locmemcache://")}

INSTALLED_APPS += ["api", "drf_spectacular", "drf_spectacular_sidecar"]
# Refuse oversized API bodies before anything reads them.
MIDDLEWARE.insert(
    MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1,
    "api.middleware.ApiBodyLimitMiddleware",
)
# A NUL in a form field, a query parameter or the path: 400 naming it, before any view (kernel/storable_text.py).
MIDDLEWARE.insert(
    MIDDLEWARE.index("api.middleware.ApiBodyLimitMiddleware") + 1, "config.middleware.RefuseNulMiddleware"
)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["accounts.api.authentication.BearerTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["accounts.api.permissions.HasAccountPermission"],
    "DEFAULT_THROTTLE_CLASSES": ["api.throttling.TokenRateThrottle"],
    "DEFAULT_PAGINATION_CLASS": "api.pagination.ApiCursorPagination",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["api.parsers.StrictJSONParser"],
    "DEFAULT_SCHEMA_CLASS": "api.schema.ApiAutoSchema",
    "EXCEPTION_HANDLER": "api.problems.problem_exception_handler",
    "UNAUTHENTICATED_USER": None,  # no AnonymousUser: anonymous requests get 401 before any view code
    "DATETIME_FORMAT": "iso-8601",
    "PAGE_SIZE": API_PAGE_SIZE,
}

SPECTACULAR_SETTINGS: dict[str, Any] = {
    "TITLE": "Relay API",
    "DESCRIPTION": (
        "Workflow automation for marketing teams. Authenticate with `Authorization: Bearer <token>` "
        "(`manage.py create_api_token`). Errors are RFC 9457 problem details (`application/problem+json`). "
        "Lists are cursor-paginated, newest first."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_AUTHENTICATION": [],  # the schema and the docs are public: they describe, they hold no data
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,  # request and response shapes differ (read-only fields)
    "SWAGGER_UI_DIST": "SIDECAR",  # Swagger UI served from our static files, no CDN
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "api.schema.add_problem_headers",
    ],
    "PATH_CONVERTER_OVERRIDES": {"api_id": {"type": "integer", "minimum": 1, "maximum": 10**18 - 1}},
    "ENUM_NAME_OVERRIDES": {"JobStatusEnum": "jobs.api.serializers.JOB_STATUS_CHOICES"},
}

# --- Workflows ------------------------------------------------------------------
# A step's retries are the workflow's own (not the queue's): attempts, first
# backoff, its cap and jitter. A step's config may override max_attempts and
# base_delay. The queue the steps run on; the depth at which chains of
# workflows started by one another's steps are cut (loop guard).
WORKFLOW_QUEUE = env.str("WORKFLOW_QUEUE", default="workflows")
WORKFLOW_STEP_MAX_ATTEMPTS = env.int("WORKFLOW_STEP_MAX_ATTEMPTS", default=3)
WORKFLOW_STEP_BASE_DELAY = env.float("WORKFLOW_STEP_BASE_DELAY", default=60.0)
WORKFLOW_STEP_MAX_DELAY = env.float("WORKFLOW_STEP_MAX_DELAY", default=3600.0)
WORKFLOW_STEP_JITTER = env.float("WORKFLOW_STEP_JITTER", default=0.1)
WORKFLOW_MAX_CHAIN_DEPTH = env.int("WORKFLOW_MAX_CHAIN_DEPTH", default=10)
# A worker's cached answer to "which workflows does this event start" is trusted at most this long, even
# while its LISTEN connection seems healthy (a notification lost on a half-open connection heals by then).
WORKFLOW_TRIGGER_CACHE_MAX_AGE = env.float("WORKFLOW_TRIGGER_CACHE_MAX_AGE", default=30.0)
# What each tick of a scheduled hook did is kept this long (the runs it started live on); 0: forever.
SCHEDULED_HOOK_RUN_RETENTION_DAYS = env.float("SCHEDULED_HOOK_RUN_RETENTION_DAYS", default=90.0)
# Per-account limits on scheduled hooks (0 turns one off): how many an account may have, how often one may fire,
# and how many contacts one tick may start a workflow or post an event for (workflows.domain.scheduled_hooks).
SCHEDULED_HOOK_MAX_PER_ACCOUNT = env.int("SCHEDULED_HOOK_MAX_PER_ACCOUNT", default=50)
SCHEDULED_HOOK_MIN_INTERVAL_MINUTES = env.int("SCHEDULED_HOOK_MIN_INTERVAL_MINUTES", default=15)
SCHEDULED_HOOK_MAX_CONTACTS_PER_TICK = env.int("SCHEDULED_HOOK_MAX_CONTACTS_PER_TICK", default=10_000)

# --- REST API: workflows, runs and events (phase 2) -------------------------------
# Idempotency-Key on POSTs that create (workflows, runs, events): the first answer is
# remembered per account for this long (idempotency app, docs/decisions/idempotency-key.md), then
# forgotten; the `idempotency.purge` job (config.handlers: the idempotency app knows no queue) deletes expired
# keys every hour.
INSTALLED_APPS += ["idempotency"]
JOB_HANDLER_MODULES = ["config.handlers", *JOB_HANDLER_MODULES]
API_IDEMPOTENCY_KEY_TTL_HOURS = env.float("API_IDEMPOTENCY_KEY_TTL_HOURS", default=24.0)
JOB_SCHEDULES = {
    **globals().get("JOB_SCHEDULES", {}),  # keeps schedules set above, if a section ever sets some
    "relay.purge_idempotency_keys": {"cron": "41 * * * *", "handler": "idempotency.purge"},
}
# Retry-After (seconds) on the 429 for an account at max_concurrent_executions: runs
# leave QUEUED/ACTIVE within seconds as workers carry their steps, so a short wait.
API_RUN_LIMIT_RETRY_AFTER = env.int("API_RUN_LIMIT_RETRY_AFTER", default=5)
# A run's detail shows its latest log rows up to this many; /executions/{id}/logs pages through all.
API_EXECUTION_LOG_LIMIT = env.int("API_EXECUTION_LOG_LIMIT", default=100)
# Named enums in the schema: several fields are called `status` (or `type`, `op` ...).
SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"].update(
    {
        "WorkflowStatusEnum": "workflows.api.serializers.WORKFLOW_STATUS_CHOICES",
        "ExecutionStatusEnum": "workflows.api.serializers.EXECUTION_STATUS_CHOICES",
        "TriggerTypeEnum": "workflows.api.serializers.TRIGGER_TYPE_CHOICES",
        "ConditionOpEnum": "workflows.api.serializers.CONDITION_OP_CHOICES",
        "ReenrollmentEnum": "workflows.api.serializers.REENROLLMENT_CHOICES",
        "ActionTypeEnum": "workflows.api.serializers.ACTION_TYPE_CHOICES",
        "StepOutcomeEnum": "workflows.api.serializers.STEP_OUTCOME_CHOICES",
    }
)
