"""The one settings module. Every value comes from the environment (django-environ).

Required secrets have no default when DEBUG is off: SECRET_KEY, DATABASE_URL, CELERY_BROKER_URL,
VERIFICATION_SAMPLE_SECRET.
Any variable can also be given as <NAME>_FILE (Docker secrets).
"""

import os
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
# A local .env is optional; production passes real environment variables.
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)


def _env_or_file(name: str, **kwargs):
    """Read NAME, or the contents of the file named by NAME_FILE (Docker secrets)."""
    file_var = f"{name}_FILE"
    if env.str(file_var, default=""):
        return Path(env.str(file_var)).read_text().strip()
    try:
        return env.str(name, **kwargs)
    except ImproperlyConfigured as exc:  # say how a newcomer gets going, not only what is unset
        raise ImproperlyConfigured(
            f"{exc}. For local use run `make run` once (it writes .env with DEBUG=1: SQLite, a "
            "development key) or `cp .env.example .env`; production sets it (or "
            f"{name}_FILE).") from None


DEBUG = env.bool("DEBUG", default=False)
_dev_default = {"default": "insecure-dev-only-key-never-used-in-production"} if DEBUG else {}
SECRET_KEY = _env_or_file("SECRET_KEY", **_dev_default)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    # Swagger UI's files served from this site's static files (no CDN): /api/docs/.
    "drf_spectacular_sidecar",
    # Accounts (allauth): local sign-up with a verified e-mail; GitHub and Hugging Face sign-in
    # are added below only when their OAuth apps are configured.
    "allauth",
    "allauth.account",
    "allauth.socialaccount",
    # Failed-login lockout by account and by address (docs/deploy.md, "Accounts").
    "axes",
    "leaderboard",
    "submissions",
    "evaluation",
]
# Developer tooling (devtools/: the bench_* commands, chaos_soak, simulate_stats and the Harbor
# job builder the tests share; house style HS44). Installed for development and CI only: by
# default exactly when DEBUG is on (make run's .env, pytest's DEBUG=1, so make test and .ci/run),
# never in production (check --deploy runs without it). HAB_DEVTOOLS=1 adds it with DEBUG off (a
# benchmark against production-like settings); HAB_DEVTOOLS=0 leaves it out under DEBUG.
HAB_DEVTOOLS = env.bool("HAB_DEVTOOLS", default=DEBUG)
if HAB_DEVTOOLS:
    INSTALLED_APPS.append("devtools")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # WhiteNoise directly after SecurityMiddleware, as its docs require.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Warm anonymous pages from the cache, before sessions/CSRF/auth (leaderboard/middleware.py).
    "leaderboard.middleware.CachedPageMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "config.middleware.ContentSecurityPolicyMiddleware",
    "allauth.account.middleware.AccountMiddleware",
    # Last, as axes requires: it turns a locked-out sign-in into the lockout page.
    "axes.middleware.AxesMiddleware",
]
# Refuse oversized upload bodies (by Content-Length) before Django reads a byte of them.
MIDDLEWARE.insert(1, "submissions.uploads.UploadSizeLimitMiddleware")
# Outermost, so it compresses every response body, streamed ones (CSV) included: HTML, JSON and
# CSV shrink 5-10x. WhiteNoise's precompressed static files already carry Content-Encoding and
# are left alone. BREACH: Django masks the CSRF token differently on every response, and no
# page reflects request input next to a secret.
MIDDLEWARE.insert(0, "django.middleware.gzip.GZipMiddleware")
# Under DEBUG (make run) the site's own 404/500 pages replace Django's technical ones.
MIDDLEWARE.append("config.middleware.StyledErrorPagesMiddleware")
STYLED_ERROR_PAGES = env.bool("STYLED_ERROR_PAGES", default=True)

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
# WSGI applications in front of Django (config/wsgi.py wraps it in each, the first outermost),
# named as MIDDLEWARE names its classes: warm anonymous pages answered from the cache at the
# layer a static file is served at (leaderboard/middleware.py).
WSGI_FRONTS = ["leaderboard.middleware.CachedPagesApp"]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
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

# SQLite is the embedded default (make run); DATABASE_URL selects PostgreSQL.
_db_default = {"default": f"sqlite:///{BASE_DIR / 'db.sqlite3'}"} if DEBUG else {}
DATABASES = {"default": env.db_url_config(_env_or_file("DATABASE_URL", **_db_default))}
# Persistent connections in production; 0 keeps tests and runserver simple.
DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=0)
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # A file (not :memory:) so tests that use several threads share one test database.
    # Per process: concurrent test runs on one machine must not share (and delete) one file.
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / "var" / f"test-db-{os.getpid()}.sqlite3")}
    # IMMEDIATE transactions take the write lock up front: concurrent writers wait (timeout)
    # instead of failing with "database is locked" when a read lock cannot be upgraded.
    DATABASES["default"].setdefault("OPTIONS", {}).update(timeout=20, transaction_mode="IMMEDIATE")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

CACHES = {"default": env.cache_url("CACHE_URL", default="locmemcache://")}
# The API throttles' counters (config/throttles.py) in a cache of their own, so that clearing
# cached pages never forgives a scraper; production points both at the shared Redis, otherwise
# each web process counts on its own.
CACHES["throttle"] = env.cache_url("THROTTLE_CACHE_URL",
                                   default=env.str("CACHE_URL", default="locmemcache://throttle"))

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
MEDIA_ROOT = Path(env.str("MEDIA_ROOT", default=str(BASE_DIR / "media")))
MEDIA_URL = "/media/"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if env.bool("USE_MANIFEST_STATIC", default=not DEBUG)
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    # Each class picks its own requests (config/throttles.py): anonymous reads by address,
    # authenticated reads by account, uploads by account; past a rate the answer is 429 with
    # Retry-After. The daily submission quota is not a throttle (A10: it is enforced in the DB).
    "DEFAULT_THROTTLE_CLASSES": [
        "config.throttles.AnonReadThrottle",
        "config.throttles.UserReadThrottle",
        "config.throttles.UploadThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon_read": env.str("API_THROTTLE_ANON_READS", default="120/minute"),
        "user_read": env.str("API_THROTTLE_USER_READS", default="600/minute"),
        "upload": env.str("API_THROTTLE_UPLOADS", default="30/hour"),
    },
    # Proxies in front of the site that append to X-Forwarded-For (0: the peer's address is the
    # client's); the throttles, the lockout and the sign-up limit all read the same address.
    "NUM_PROXIES": env.int("TRUSTED_PROXY_COUNT", default=0) or None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "HealthAgentBench leaderboard API",
    "DESCRIPTION": (
        "Leaderboard data (`/api/v1/leaderboard/`, `trials/`, `categories/`, `groups/`, "
        "`harness-families/`, `benchmarks/`): public and read-only; rates are fractions in "
        "[0, 1]. Submissions (`/api/v1/submissions/`): upload a Harbor run and follow its "
        "verification with an API token from your account page, sent as "
        "`Authorization: Token hab_...` (the Authorize button takes the whole value, "
        "`Token ` included); the site's Submit page shows the commands. Every operation "
        "answers JSON (whatever the Accept header); its errors carry `detail` (an upload's "
        "refusal: `code` and `problems`). Query parameters an operation does not list are "
        "ignored; a listed one out of its bounds, type or enum, or given twice, is a 400."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The interactive documentation loads Swagger UI from our own static files (the sidecar
    # package), never from a CDN, so the CSP stays script-src 'self'.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # The default hook, then the OpenAPI links (upload -> status, ...: config.api.LINKS).
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums",
                             "config.api.add_links"],
}

# --- Celery (new-style names, CELERY_ namespace) ---
# make run needs no broker server: kombu's SQLAlchemy transport on a SQLite file beside the
# database. Its consumers take a message inside BEGIN IMMEDIATE, so two never read one message
# and none reads a half-written one, as the filesystem transport's consumers did (kombu 5.7.0
# writes a message file after creating it and reads without a lock: an empty file killed the
# worker with a JSONDecodeError, celery/kombu#1551). `manage.py bench_broker` measured both
# (docs/testing.md). Production names Redis or RabbitMQ (no default with DEBUG off).
BROKER_SQLITE_FILE = Path(env.str("BROKER_SQLITE_FILE",
                                  default=str(BASE_DIR / "var" / "broker.sqlite3")))
_broker_default = {"default": f"sqla+sqlite:///{BROKER_SQLITE_FILE}"} if DEBUG else {}
CELERY_BROKER_URL = _env_or_file("CELERY_BROKER_URL", **_broker_default)
_celery_fs_dir = Path(env.str("CELERY_FS_DIR", default=str(BASE_DIR / "var" / "broker")))
if CELERY_BROKER_URL.startswith("filesystem"):
    # Kept for comparison only (bench_broker): the transport make run used before.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_celery_fs_dir),
        "data_folder_out": str(_celery_fs_dir),
        "processed_folder": str(_celery_fs_dir / "processed"),
        # kombu puts broadcast (pidbox) queues here; default is ./control in the cwd.
        "control_folder": str(_celery_fs_dir / "control"),
    }
elif CELERY_BROKER_URL.startswith("sqla+"):
    # The options go to SQLAlchemy's create_engine: a writer waits up to 30 s for the lock
    # another process holds (web, two workers and the beat share the file) instead of failing.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"connect_args": {"timeout": 30}}
else:
    # Redis redelivers unacked messages after visibility_timeout: keep it above the longest job.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env.int("CELERY_VISIBILITY_TIMEOUT_S", default=6 * 3600)}
# Redeliver a job whose worker died mid-run; jobs are idempotent (claimed by conditional UPDATE).
CELERY_TASK_ACKS_LATE = True
# Without this a SIGKILLed child's message is acked and the job is lost.
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# Long container jobs: never reserve a second job while one runs. With late acks a running job's
# message counts against the prefetch count (concurrency x 1), so RabbitMQ never delivers a
# message no process can start. Redis emulates prefetch in the client, and after a reconnect (a
# broker restart while a job runs) the running job's message no longer counts: a busy worker
# then took the next job's message and, if SIGKILLed, left it unacknowledged until the
# visibility timeout. Celery's disable_prefetch (Redis only) fetches a message only
# when a pool process is free.
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_DISABLE_PREFETCH = CELERY_BROKER_URL.startswith(("redis", "rediss"))
# The database is the source of truth; results are not needed.
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = "web"
CELERY_TIMEZONE = "UTC"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
}

# --- Security (production values; check --deploy runs in CI with DEBUG off) ---
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=not DEBUG)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = not DEBUG
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=not DEBUG)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=not DEBUG)
SILENCED_SYSTEM_CHECKS = env.list("SILENCED_SYSTEM_CHECKS", default=[])

# --- Leaderboard ---
# Seed of the deterministic demo reconstruction and of any resampling.
LEADERBOARD_RANDOM_SEED = env.int("LEADERBOARD_RANDOM_SEED", default=20260602)
# Two-sided significance level of the paired tie test.
LEADERBOARD_TIE_ALPHA = env.float("LEADERBOARD_TIE_ALPHA", default=0.05)
# Cached pages are keyed by the aggregate version (leaderboard/caching.py), so they never go
# stale; the timeout only frees memory held by versions nobody asks for any more.
LEADERBOARD_CACHE_TIMEOUT_S = env.int("LEADERBOARD_CACHE_TIMEOUT_S", default=24 * 3600)
# Agents per page on the list pages (top N, then "next" or "show all"), and on the task matrix
# (54 cells of 3 attempts per agent).
# How long a remembered version state may answer requests without the database (a bump forgets
# it at once in a shared cache; this bounds a per-process cache such as local memory).
# Unset: 0.5 s with local memory (per process), an hour with a shared cache (a bump reaches it).
LEADERBOARD_STATE_TTL_S = (env.float("LEADERBOARD_STATE_TTL_S")
                           if os.environ.get("LEADERBOARD_STATE_TTL_S") else None)
# A cold page asked for by many at once is rendered by one request; the others wait for its
# bytes up to this long (then render it themselves).
LEADERBOARD_RENDER_WAIT_S = env.float("LEADERBOARD_RENDER_WAIT_S", default=10.0)
# Bytes of the pages each web process keeps in its own memory beside the cache (the warm hits
# it answered lately; a hit then copies nothing out of the cache, nor over the network from
# Redis). A page over a quarter of it is not kept.
LEADERBOARD_MEMO_BYTES = env.int("LEADERBOARD_MEMO_BYTES", default=32 * 1024 * 1024)
LEADERBOARD_PAGE_SIZE = env.int("LEADERBOARD_PAGE_SIZE", default=100)
# Models (and harness x model lines) per page of /harness-effect/.
LEADERBOARD_GROUP_PAGE_SIZE = env.int("LEADERBOARD_GROUP_PAGE_SIZE", default=25)
# Publishes and withdrawals listed on /changelog/ (newest first).
LEADERBOARD_CHANGELOG_EVENTS = env.int("LEADERBOARD_CHANGELOG_EVENTS", default=200)
LEADERBOARD_MATRIX_PAGE_SIZE = env.int("LEADERBOARD_MATRIX_PAGE_SIZE", default=50)

# --- Evaluation ---
# OpenAI-compatible chat endpoint used as the X-ray report judge (CheXprompt-style rubric).
# Empty: no judge, and X-ray trials are "awaiting judge" (not scored) until one is configured
# and `manage.py judge_pending` (or the next verification) re-grades them. The verifier never
# reaches it itself: the judge gateway (evaluation/runner/judge/server.py) does, from the
# egress network below, and caches every judgement (evaluation/judge/cache.py).
XRAY_JUDGE_URL = env.str("XRAY_JUDGE_URL", default="")
XRAY_JUDGE_MODEL = env.str("XRAY_JUDGE_MODEL", default="gpt-5.4")
XRAY_JUDGE_API_KEY = _env_or_file("XRAY_JUDGE_API_KEY", default="")
XRAY_JUDGE_TIMEOUT_S = env.float("XRAY_JUDGE_TIMEOUT_S", default=60.0)
# The Docker network the judge gateway joins to reach XRAY_JUDGE_URL (the verifier joins none).
XRAY_JUDGE_EGRESS_NETWORK = env.str("XRAY_JUDGE_EGRESS_NETWORK", default="bridge")
# An https judge is verified against the worker's CA bundle (Debian's ca-certificates, else
# certifi's), which the judge gateway gets beside its config; a PEM file of further CAs (a
# private endpoint's) is added from here.
XRAY_JUDGE_CA_FILE = env.str("XRAY_JUDGE_CA_FILE", default="")
# OpenAI-compatible chat endpoint of the trajectory judge (evaluation/judge/trajectory.py): it
# reads every counted pass's trajectory for reward hacking. Empty: those passes are "awaiting
# trajectory judge" and the submission cannot be published until one is configured and
# `manage.py judge_pending` re-verifies it. The worker asks it (no container is involved).
TRAJECTORY_JUDGE_URL = env.str("TRAJECTORY_JUDGE_URL", default="")
TRAJECTORY_JUDGE_MODEL = env.str("TRAJECTORY_JUDGE_MODEL", default="gpt-5.4")
TRAJECTORY_JUDGE_API_KEY = _env_or_file("TRAJECTORY_JUDGE_API_KEY", default="")
TRAJECTORY_JUDGE_TIMEOUT_S = env.float("TRAJECTORY_JUDGE_TIMEOUT_S", default=120.0)
# USD per million input / output tokens of the judge model: each judgement's cost is counted
# against its submission (cache hits cost nothing).
TRAJECTORY_JUDGE_PRICE_INPUT = env.float("TRAJECTORY_JUDGE_PRICE_INPUT", default=0.0)
TRAJECTORY_JUDGE_PRICE_OUTPUT = env.float("TRAJECTORY_JUDGE_PRICE_OUTPUT", default=0.0)
# make run only: without TRAJECTORY_JUDGE_URL, the passes of a try-out version are judged by the
# synthetic trajectory judge (a rule, not an LLM, labelled on every judgement), so a try-out
# reaches a publishable verdict; check --deploy refuses it with DEBUG off.
TRAJECTORY_JUDGE_SYNTHETIC = env.bool("TRAJECTORY_JUDGE_SYNTHETIC", default=DEBUG)
# Docker engine used by evaluation/runner.py (created lazily, never at import).
DOCKER_HOST = env.str("DOCKER_HOST", default="unix:///var/run/docker.sock")
DOCKER_CLIENT_TIMEOUT_S = env.int("DOCKER_CLIENT_TIMEOUT_S", default=120)
# Local tag of the debootstrap-built runtime base image that every task starts FROM.
TASK_BASE_IMAGE = env.str("TASK_BASE_IMAGE", default="healthagentbench/base:bookworm")
# Task sources: directories of Harbor packages (<category>/<task_id>/) whose benchmark versions
# are defined by <source>/benchmarks/<name>@<version>.toml. The public synthetic tasks are the
# repository's tasks/; licensed ones (the paper's) live in a private directory present only on
# evaluation machines: TASK_SOURCES=/app/tasks,/srv/hab-tasks-private. An entry may also be a
# git repository pinned to a commit, <git URL>@<40-hex commit>[#<subdirectory>], cloned once
# into TASK_SOURCES_CACHE and checked out at exactly that commit (evaluation/task_sources.py).
# TASKS_DIR is the repository's own source (where new_task scaffolds).
TASKS_DIR = BASE_DIR / "tasks"
TASK_SOURCES = env.list("TASK_SOURCES", default=[str(TASKS_DIR)])
TASK_SOURCES_CACHE = Path(env.str("TASK_SOURCES_CACHE", default=str(BASE_DIR / "var" / "task-sources")))
# Public git URL of this repository (shown on the contribute and submit pages: clone it to get
# the public task packages and the tools).
REPOSITORY_URL = env.str("REPOSITORY_URL", default="")
# The commit /registry.json pins the public task packages to (Harbor's registry format: with
# REPOSITORY_URL, `harbor run -d <name>@<version> --registry-url <site>/registry.json` fetches
# them at that commit; without, the paths are relative to a clone of the repository).
REGISTRY_GIT_COMMIT = env.str("REGISTRY_GIT_COMMIT", default="")
# Task images in an OCI registry (docs/images.md): the record `IMAGE_REGISTRY=... make images`
# writes (each package's image by digest). Set, /registry.json names each package's image and
# intake accepts jobs run from the served packages (`manage.py publish_packages`: task.toml with
# Harbor's [environment].docker_image), which live at REGISTRY_GIT_URL (default REPOSITORY_URL)
# at REGISTRY_GIT_COMMIT. Empty (the default): nothing published, Harbor builds locally.
PUBLISHED_IMAGES_FILE = env.str("PUBLISHED_IMAGES_FILE", default="")
REGISTRY_GIT_URL = env.str("REGISTRY_GIT_URL", default="")

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "account"
LOGOUT_REDIRECT_URL = "leaderboard"

# --- Accounts (django-allauth, django-axes; docs/deploy.md, "Accounts") ---
AUTHENTICATION_BACKENDS = [
    # First, as axes requires: it refuses a locked-out account or address before any check.
    "axes.backends.AxesStandaloneBackend",
    # allauth's backend is Django's ModelBackend (permissions, the admin's sign-in) that also
    # takes an e-mail address; Django's own beside it would hash every wrong password twice.
    "allauth.account.auth_backends.AuthenticationBackend",
]
ACCOUNT_ADAPTER = "submissions.accounts.AccountAdapter"
ACCOUNT_FORMS = {"login": "submissions.accounts.LoginForm"}
ACCOUNT_LOGIN_METHODS = {"username", "email"}
ACCOUNT_SIGNUP_FIELDS = ["username*", "email*", "password1*", "password2*"]
ACCOUNT_UNIQUE_EMAIL = True
# Sessions last SESSION_COOKIE_AGE as before allauth: no "remember me" box to tick.
ACCOUNT_SESSION_REMEMBER = True
# A local account signs in once its e-mail address is confirmed (the link in the e-mail);
# accounts a maintainer made (createsuperuser, the admin) have their address vouched for.
ACCOUNT_EMAIL_VERIFICATION = "mandatory"
ACCOUNT_LOGIN_ON_EMAIL_CONFIRMATION = True
ACCOUNT_EMAIL_SUBJECT_PREFIX = "[HealthAgentBench] "
ACCOUNT_LOGOUT_REDIRECT_URL = LOGOUT_REDIRECT_URL
# allauth's own limits stay on for e-mail sending and password resets. Failed sign-ins are
# axes' (by account and by address, below) and sign-ups are counted per address in the database
# (ACCOUNT_SIGNUPS_PER_ADDRESS), so allauth's cache counters for those two are off.
ACCOUNT_RATE_LIMITS = {"login_failed": None, "login": None, "signup": None}
# Sign-ups accepted from one address per hour; the next gets 429 with Retry-After.
ACCOUNT_SIGNUPS_PER_ADDRESS_PER_HOUR = env.int("ACCOUNT_SIGNUPS_PER_ADDRESS_PER_HOUR", default=5)
SOCIALACCOUNT_EMAIL_AUTHENTICATION = False
SOCIALACCOUNT_ONLY = False
# GitHub and Hugging Face sign-in: each provider is offered only when its OAuth app's client id
# and secret are set (make run and tests need neither).
SOCIALACCOUNT_PROVIDERS = {}
if env.str("GITHUB_OAUTH_CLIENT_ID", default="") and _env_or_file("GITHUB_OAUTH_SECRET", default=""):
    INSTALLED_APPS.append("allauth.socialaccount.providers.github")
    SOCIALACCOUNT_PROVIDERS["github"] = {
        "APPS": [{"client_id": env.str("GITHUB_OAUTH_CLIENT_ID"),
                  "secret": _env_or_file("GITHUB_OAUTH_SECRET"), "key": ""}],
        # Only the account's e-mail addresses are read, the verified primary one kept.
        "SCOPE": ["user:email"],
    }
# Hugging Face signs in by OpenID Connect (allauth has no provider of its own for it).
if (env.str("HUGGINGFACE_OAUTH_CLIENT_ID", default="")
        and _env_or_file("HUGGINGFACE_OAUTH_SECRET", default="")):
    INSTALLED_APPS.append("allauth.socialaccount.providers.openid_connect")
    SOCIALACCOUNT_PROVIDERS["openid_connect"] = {"APPS": [{
        "provider_id": "huggingface", "name": "Hugging Face",
        "client_id": env.str("HUGGINGFACE_OAUTH_CLIENT_ID"),
        "secret": _env_or_file("HUGGINGFACE_OAUTH_SECRET"),
        "settings": {"server_url": "https://huggingface.co",
                     "scope": ["openid", "profile", "email"]},
    }]}
# Outgoing mail (confirmation links, password resets): EMAIL_URL (smtp+tls://user:pass@host:587)
# in production; with DEBUG on (make run) the console backend prints each e-mail, link included,
# in the terminal that runs the site.
if env.str("EMAIL_URL", default=""):
    _mail = env.email_url("EMAIL_URL")
    MAILERS = {"default": {"BACKEND": _mail["EMAIL_BACKEND"], "OPTIONS": {
        "host": _mail["EMAIL_HOST"], "port": _mail["EMAIL_PORT"],
        "username": _mail["EMAIL_HOST_USER"],
        "password": _env_or_file("EMAIL_PASSWORD", default="") or _mail["EMAIL_HOST_PASSWORD"],
        "use_tls": bool(_mail.get("EMAIL_USE_TLS")), "use_ssl": bool(_mail.get("EMAIL_USE_SSL")),
        "timeout": 20}}}
else:
    MAILERS = {"default": {"BACKEND": "django.core.mail.backends.console.EmailBackend" if DEBUG
                           else "django.core.mail.backends.smtp.EmailBackend"}}
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="HealthAgentBench <noreply@localhost>")
# Failed sign-ins: AXES_FAILURE_LIMIT failures lock the account (whatever the address) and,
# separately, the address (whatever the account) for AXES_COOLOFF_HOURS; a success resets the
# account's count. Maintainers unlock at once in the admin (Axes > Access attempts) or with
# `manage.py axes_reset_username <name>` / `axes_reset_ip <address>` / `axes_reset`.
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=20)
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_COOLOFF_TIME = env.float("AXES_COOLOFF_HOURS", default=1.0)
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "submissions.accounts.lockout_response"
AXES_USERNAME_CALLABLE = "submissions.accounts.axes_username"
AXES_CLIENT_IP_CALLABLE = "submissions.accounts.client_address"
# Never logs passwords; the access log of successful sign-ins is not needed.
AXES_DISABLE_ACCESS_LOG = True
# Quiet start-up (commands' output stays the project's); each lockout is logged by
# submissions.accounts.lockout_response instead.
AXES_VERBOSE = False

# --- Submissions ---
# Accepted submissions per user per UTC day (maintainers are exempt); enforced in the database.
SUBMISSION_DAILY_QUOTA = env.int("SUBMISSION_DAILY_QUOTA", default=5)
# The daily quota of an account that signed up on the site until its first submission is
# published (a new account costs its maker something; accounts a maintainer made are exempt).
SUBMISSION_NEW_ACCOUNT_DAILY_QUOTA = env.int("SUBMISSION_NEW_ACCOUNT_DAILY_QUOTA", default=2)
# Uploads with a larger share of trials claiming an infrastructure error are refused (the
# submitter resumes the job instead); the ones accepted count as failures unless confirmed.
SUBMISSION_MAX_INFRA_ERROR_SHARE = env.float("SUBMISSION_MAX_INFRA_ERROR_SHARE", default=0.05)
# Largest accepted upload body; bigger requests get 413 before the body is read.
SUBMISSION_MAX_UPLOAD_BYTES = env.int("SUBMISSION_MAX_UPLOAD_BYTES", default=200 * 1024 * 1024)
# Where uploads are staged (streamed to disk, extracted, validated) before storage; private.
SUBMISSION_STAGING_DIR = Path(env.str("SUBMISSION_STAGING_DIR", default=str(BASE_DIR / "var" / "staging")))
# Uploads are streamed to disk from the first byte: never held in memory.
FILE_UPLOAD_MAX_MEMORY_SIZE = 0
FILE_UPLOAD_TEMP_DIR = str(SUBMISSION_STAGING_DIR / "incoming")
FILE_UPLOAD_HANDLERS = [
    "submissions.uploads.LimitedTemporaryFileUploadHandler",
]
# Multipart field/file counts (CVE-2023-24580 hardening).
DATA_UPLOAD_MAX_NUMBER_FIELDS = 100
DATA_UPLOAD_MAX_NUMBER_FILES = 4

# --- Verification (evaluation/verification.py, evaluation/tasks.py) ---
# Queues (HS17): `web` for light jobs (reaper, mail), `evaluation` for container jobs; production
# evaluation workers consume only `evaluation` with --concurrency sized to their machine.
VERIFICATION_QUEUE = env.str("VERIFICATION_QUEUE", default="evaluation")
# Uploads are validated off the web request (submissions/intake.py) on a queue of their own, so a
# long verification never delays an upload's verdict, nor a burst of uploads a verification.
INTAKE_QUEUE = env.str("INTAKE_QUEUE", default="intake")
CELERY_TASK_ROUTES = {
    "evaluation.verify_submission": {"queue": VERIFICATION_QUEUE},
    "evaluation.reap_stuck_submissions": {"queue": CELERY_TASK_DEFAULT_QUEUE},
    "submissions.intake_upload": {"queue": INTAKE_QUEUE},
    "submissions.reap_stuck_intake": {"queue": CELERY_TASK_DEFAULT_QUEUE},
}
# Hard limit of one upload's intake (extraction, validation, secret scan, storage); the soft
# limit leaves a margin to clean its staging folder (house style HS18).
INTAKE_TIME_LIMIT_S = env.int("INTAKE_TIME_LIMIT_S", default=30 * 60)
# A claim older than this (a worker killed mid-intake) is taken over by the next delivery; above
# the time limit, so a live intake is never run twice.
INTAKE_STALE_AFTER_S = env.int("INTAKE_STALE_AFTER_S", default=INTAKE_TIME_LIMIT_S + 300)
# Received uploads whose message was published longer ago than this (or never: broker down) are
# published again by the intake reaper; duplicates are no-ops (the claim).
INTAKE_REPUBLISH_AFTER_S = env.int("INTAKE_REPUBLISH_AFTER_S", default=120)
# Claims per upload before it is refused as one the site cannot process (a poison archive that
# kills its worker every time).
INTAKE_MAX_ATTEMPTS = env.int("INTAKE_MAX_ATTEMPTS", default=3)
# Hard limit of one verification job (all its re-grades, replays and re-runs); the soft limit
# leaves a cleanup margin for removing containers (house style HS18).
VERIFICATION_TIME_LIMIT_S = env.int("VERIFICATION_TIME_LIMIT_S", default=4 * 3600)
VERIFICATION_SOFT_TIME_LIMIT_S = env.int(
    "VERIFICATION_SOFT_TIME_LIMIT_S", default=VERIFICATION_TIME_LIMIT_S - 300
)
# The broker must not redeliver a running job: its visibility timeout exceeds the job limit (R3).
if "visibility_timeout" in CELERY_BROKER_TRANSPORT_OPTIONS:
    CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] = max(
        CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"], VERIFICATION_TIME_LIMIT_S + 1800
    )
# Publishing fails fast when the broker is down; the reconciler re-publishes later (R5).
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 2, "interval_start": 0, "interval_step": 0.5, "interval_max": 1,
}
# Claims per job before it is failed as an infrastructure problem (R4); never scored.
VERIFICATION_MAX_ATTEMPTS = env.int("VERIFICATION_MAX_ATTEMPTS", default=3)
# First retry delay after an infrastructure error; doubles per retry (Celery retry_backoff).
VERIFICATION_RETRY_BACKOFF_S = env.int("VERIFICATION_RETRY_BACKOFF_S", default=30)
# A running job writes heartbeat_at this often; older than STALE_AFTER it is taken back (HS19).
VERIFICATION_HEARTBEAT_S = env.float("VERIFICATION_HEARTBEAT_S", default=30.0)
VERIFICATION_STALE_AFTER_S = env.int("VERIFICATION_STALE_AFTER_S", default=600)
# The reaper (reap_stuck_submissions) runs this often, on the beat below.
VERIFICATION_REAPER_INTERVAL_S = env.float("VERIFICATION_REAPER_INTERVAL_S", default=60.0)
# A pending job whose message left the queue (no ready message is waiting in it) but that no
# worker claimed within this bound was taken by a worker that died holding it (a prefetched
# message of a SIGKILLed worker waits for the broker's visibility timeout): it is published
# again. The claim is a compare-and-swap, so the copy the broker may redeliver later is a no-op.
VERIFICATION_UNCLAIMED_AFTER_S = env.float("VERIFICATION_UNCLAIMED_AFTER_S",
                                           default=2 * VERIFICATION_REAPER_INTERVAL_S)
# Pending jobs published longer ago than this are published again even while the queue holds
# messages (a message lost behind a long queue); duplicates are no-ops.
VERIFICATION_REPUBLISH_AFTER_S = env.int("VERIFICATION_REPUBLISH_AFTER_S", default=1800)
# A work directory (hab-regrade-*, hab-rerun-*, ...) left loose in the temporary folder is a dead
# worker's once untouched this long: a live job keeps one at most its hard time limit. A pool
# process's own folder (hab-work-<pid>) goes as soon as that process is gone, whatever its age.
VERIFICATION_WORK_DIR_MAX_AGE_S = env.int("VERIFICATION_WORK_DIR_MAX_AGE_S",
                                          default=VERIFICATION_TIME_LIMIT_S + 1800)
# Rows the reaper handles per run (bounded batch).
VERIFICATION_REAPER_BATCH = env.int("VERIFICATION_REAPER_BATCH", default=50)
# Trials graded at once inside one job (threads; each runs its own containers).
VERIFICATION_PARALLEL_TRIALS = env.int("VERIFICATION_PARALLEL_TRIALS", default=2)
# Which checks run: any of regrade, replay, rerun.
VERIFICATION_CHECKS = env.list("VERIFICATION_CHECKS", default=["regrade", "replay", "rerun"])
# Replay sample: every passing trial (when true) plus this many failing ones; capped in total.
VERIFICATION_REPLAY_PASSING = env.bool("VERIFICATION_REPLAY_PASSING", default=True)
VERIFICATION_REPLAY_FAILING = env.int("VERIFICATION_REPLAY_FAILING", default=3)
VERIFICATION_REPLAY_MAX = env.int("VERIFICATION_REPLAY_MAX", default=200)
# Re-run sample: this many tasks, each run this many times, with the submission's agent.
# Claimed infrastructure errors the site re-attempts itself per verification (in a fresh
# container: Harbor re-run, site agent, replay or the bare environment, then the verifier); only
# a re-attempt that hits an infrastructure failure too confirms one. The rest stay unconfirmed
# (failures) and their check row says so: the cap bounds a job's work whatever is claimed.
VERIFICATION_INFRA_REATTEMPT_MAX = env.int("VERIFICATION_INFRA_REATTEMPT_MAX", default=10)
# Where the site re-ran a trial, its measured cost (the re-run's tokens at the dated price table)
# is shown beside the submission's reported cost, and a reported cost below this fraction of the
# re-run's is flagged on the status page and in the status API (submissions.measured).
VERIFICATION_REPORTED_COST_MIN_RATIO = env.float("VERIFICATION_REPORTED_COST_MIN_RATIO",
                                                 default=0.5)
# Level of the re-run's one-sided exact test against inflated claims (the design below).
VERIFICATION_RERUN_ALPHA = env.float("VERIFICATION_RERUN_ALPHA", default=0.05)
# The site secret under which the re-run sample is chosen (an HMAC of the archive's digest,
# submissions.verification.sample). Anyone who knows it can predict a submission's sample, so
# like SECRET_KEY it has no default when DEBUG is off: the site refuses to start without one of
# at least VERIFICATION_SAMPLE_SECRET_MIN_LENGTH characters that is not the development default
# (with DEBUG on, `check --deploy` still refuses the default: evaluation.E002). Also
# VERIFICATION_SAMPLE_SECRET_FILE.
VERIFICATION_SAMPLE_SECRET_DEFAULT = "insecure-dev-only-sample-secret"
VERIFICATION_SAMPLE_SECRET_MIN_LENGTH = 32
VERIFICATION_SAMPLE_SECRET = _env_or_file(
    "VERIFICATION_SAMPLE_SECRET",
    **({"default": VERIFICATION_SAMPLE_SECRET_DEFAULT} if DEBUG else {}))
if not DEBUG and (VERIFICATION_SAMPLE_SECRET == VERIFICATION_SAMPLE_SECRET_DEFAULT
                  or len(VERIFICATION_SAMPLE_SECRET) < VERIFICATION_SAMPLE_SECRET_MIN_LENGTH):
    raise ImproperlyConfigured(
        "VERIFICATION_SAMPLE_SECRET (or VERIFICATION_SAMPLE_SECRET_FILE) must be a private "
        f"value of at least {VERIFICATION_SAMPLE_SECRET_MIN_LENGTH} characters when DEBUG is off, "
        "not empty nor the development default: whoever knows it can predict which trials the "
        "site re-runs. Generate one with `head -c 48 /dev/urandom | base64`.")
# The sequential re-run design (submissions/verification/design.py; methods page, "How many
# re-runs"): re-run one trial of FIRST_TASKS tasks (in the secret order), then STEP_TASKS more per
# look while the exact test (level VERIFICATION_RERUN_ALPHA, spread over the looks by SPENDING:
# pocock, obrien-fleming or linear) is inconclusive, never more than MAX_TRIALS re-run trials nor
# MAX_COST_USD of model cost (at the per-trial cost estimate; 0: no cost cap). Before the last look
# the design stops as consistent when the re-runs fall short of the claims by less than
# FUTILITY_Z standard deviations. PER_TASK: re-run trials per task (1 gives the most power per
# re-run). Chosen by `manage.py simulate_stats --only rerun` (leaderboard/data/rerun_design.csv).
VERIFICATION_RERUN_FIRST_TASKS = env.int("VERIFICATION_RERUN_FIRST_TASKS", default=16)
VERIFICATION_RERUN_STEP_TASKS = env.int("VERIFICATION_RERUN_STEP_TASKS", default=6)
VERIFICATION_RERUN_PER_TASK = env.int("VERIFICATION_RERUN_PER_TASK", default=1)
VERIFICATION_RERUN_MAX_TRIALS = env.int("VERIFICATION_RERUN_MAX_TRIALS", default=54)
VERIFICATION_RERUN_MAX_COST_USD = env.float("VERIFICATION_RERUN_MAX_COST_USD", default=100.0)
VERIFICATION_RERUN_FUTILITY_Z = env.float("VERIFICATION_RERUN_FUTILITY_Z", default=0.5)
VERIFICATION_RERUN_SPENDING = env.str("VERIFICATION_RERUN_SPENDING", default="pocock")
# At the last look, re-runs that fall short of the site's outcomes by ACCEPT_Z standard deviations
# or more end inconclusive (not verified) even when the exact bound does not reject.
VERIFICATION_RERUN_ACCEPT_Z = env.float("VERIFICATION_RERUN_ACCEPT_Z", default=1.5)
# The power floor: a submission is verified only when its planned re-run detects an inflation of
# FLOOR_POINTS points at least FLOOR of the time (methods page's model); else "consistent
# (re-run underpowered)". The site first tries more re-runs per task to reach it, within the caps.
VERIFICATION_RERUN_POWER_FLOOR_POINTS = env.int("VERIFICATION_RERUN_POWER_FLOOR_POINTS",
                                                default=15)
VERIFICATION_RERUN_POWER_FLOOR = env.float("VERIFICATION_RERUN_POWER_FLOOR", default=0.5)
# The site's cost estimate per re-run trial when neither the trial's tokens at the price table
# nor any measured re-run of its category tell it (the model-cost cap divides by the estimate;
# the submission's reported cost never enters it).
VERIFICATION_RERUN_COST_DEFAULT_USD = env.float("VERIFICATION_RERUN_COST_DEFAULT_USD",
                                                default=1.0)
# A reported cost above this multiple of the site's estimate is flagged, as one far below is.
VERIFICATION_REPORTED_COST_MAX_RATIO = env.float("VERIFICATION_REPORTED_COST_MAX_RATIO",
                                                 default=3.0)
# Command agents the site can run, by harness slug (JSON): {"codex": {"install": "...",
# "run": "codex exec {instruction_file}", "env": ["OPENAI_API_KEY"]}}. oracle, nop and replay
# are built in. API keys named in "env" are read from VERIFICATION_AGENT_SECRETS.
VERIFICATION_COMMAND_AGENTS = env.json("VERIFICATION_COMMAND_AGENTS", default={})
VERIFICATION_AGENT_SECRETS = env.json("VERIFICATION_AGENT_SECRETS", default={})
# Re-run through the real Harbor CLI (evaluation/runner/harbor.py). Harbor agents the site runs,
# by harness slug, with the harness versions it accepts (empty list: any): harnesses that run on
# the worker and drive the task container from outside (terminus-2; its network is none), and
# the installed agents the site bakes (evaluation/runner/harnesses.py).
VERIFICATION_HARBOR_AGENTS = env.json("VERIFICATION_HARBOR_AGENTS",
                                      default={"terminus-2": ["2.0.0"],
                                               "mini-swe-agent": ["2.4.6"]})
# The coding-agent CLIs the site can bake (claude-code 2.1.332, codex 0.171.0, copilot-cli
# 1.0.102: scripts/build-images --harness all) are re-run once listed here; the worker's health
# check then requires their harness images.
# Harbor installed agents (mini-swe-agent) run inside the task container: it joins an internal
# network whose only other member is the site's model gateway, which joins this network to
# reach the endpoint (evaluation/runner/egress.py). The harness must be baked beforehand:
# scripts/build-images --harness mini-swe-agent.
VERIFICATION_RERUN_EGRESS_NETWORK = env.str("VERIFICATION_RERUN_EGRESS_NETWORK", default="bridge")
# The site's model endpoints, by the submission's model name (JSON): {"openai/gpt-5":
# {"base_url": "https://...", "key_env": "OPENAI_API_KEY", "key_secret": "OPENAI_API_KEY",
# "model": "openai/gpt-5"}}. The key is VERIFICATION_AGENT_SECRETS[key_secret], given to Harbor
# as the environment variable key_env; "model" (optional) is the name Harbor is given. A model
# with no entry is not re-run: endpoints and keys never come from a submission.
VERIFICATION_RERUN_MODEL_ENDPOINTS = env.json("VERIFICATION_RERUN_MODEL_ENDPOINTS", default={})
# The pinned Harbor CLI's venv (scripts/harbor-venv) and the wall-clock cap of one harbor run
# (0: the task's agent timeout plus 15 minutes).
HARBOR_VENV = env.str("HARBOR_VENV", default=str(BASE_DIR / ".venv-harbor"))
VERIFICATION_HARBOR_TIMEOUT_S = env.float("VERIFICATION_HARBOR_TIMEOUT_S", default=0.0)
# Harbor's environment backend of the re-run, named as Harbor names it (`harbor run --env`):
# docker (the worker's own engine) or a vetted cloud backend (evaluation/runner/harbor_envs.py:
# daytona, modal, e2b, runloop, gke), with its `--ek key=value` kwargs (JSON object) and its
# credentials taken from VERIFICATION_AGENT_SECRETS. Re-grades and replays never leave the worker.
VERIFICATION_HARBOR_ENVIRONMENT = env.str("VERIFICATION_HARBOR_ENVIRONMENT", default="docker")
VERIFICATION_HARBOR_ENVIRONMENT_KWARGS = env.json("VERIFICATION_HARBOR_ENVIRONMENT_KWARGS",
                                                  default={})
# Container names and labels of a job's runs start with <prefix><job id>- (deterministic; set a
# distinct prefix when several sites or test sessions share one Docker engine).
VERIFICATION_RUN_PREFIX = env.str("VERIFICATION_RUN_PREFIX", default="v")
# The worker is the only user of its Docker engine and temporary folder (an evaluation machine
# of its own): at start, before it consumes, it removes every labelled container, network and
# volume on the engine and the runner's temporary folders (left there by a host lost mid-job).
VERIFICATION_REAP_ON_START = env.bool("VERIFICATION_REAP_ON_START", default=False)
# Worker health (R12, evaluation/health.py): a worker claims jobs only with this much free disk
# (temporary files, media, the engine's data root), a reachable engine with a patched runc, the
# base image (with this id when set, e.g. sha256:...) and every task image under its digest tag.
VERIFICATION_MIN_FREE_DISK_MB = env.int("VERIFICATION_MIN_FREE_DISK_MB", default=2048)
# OCI runtime of containers that run submitter-written commands or read submitted output
# (replays, re-grades, re-runs): auto = gVisor's runsc when the engine lists it and it passes a
# compatibility probe.
VERIFICATION_SANDBOX_RUNTIME = env.str("VERIFICATION_SANDBOX_RUNTIME", default="auto")
# A production worker (DEBUG off) whose sandbox runtime is not gVisor is unhealthy, and claims
# nothing, unless the operator accepts runc's shared kernel by name here.
VERIFICATION_ALLOW_RUNC_WITHOUT_GVISOR = env.bool("VERIFICATION_ALLOW_RUNC_WITHOUT_GVISOR",
                                                  default=False)
VERIFICATION_EXPECTED_BASE_IMAGE_ID = env.str("VERIFICATION_EXPECTED_BASE_IMAGE_ID", default="")
# Periodic jobs, declared in one place (HS20). Every 60 s: https://crontab.guru/#*_*_*_*_*
CELERY_BEAT_SCHEDULE = {
    "reap-stuck-submissions": {
        "task": "evaluation.reap_stuck_submissions",
        "schedule": VERIFICATION_REAPER_INTERVAL_S,
    },
}

# --- Stored uploads: filesystem by default, S3-compatible in production (django-storages) ---
# Seconds before a request to the S3 store is given up (connect and read; retried 3 times).
S3_TIMEOUT_S = env.float("S3_TIMEOUT_S", default=10.0)
if env.bool("USE_S3", default=False):
    from botocore.config import Config as _botocore_config

    STORAGES["default"] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": env.str("S3_BUCKET"),
            "endpoint_url": env.str("S3_ENDPOINT_URL", default=None),
            "region_name": env.str("S3_REGION", default=None),
            "access_key": _env_or_file("S3_ACCESS_KEY_ID", default="") or None,
            "secret_key": _env_or_file("S3_SECRET_ACCESS_KEY", default="") or None,
            # Uploads are never public: every download goes through the site's access checks.
            "default_acl": "private",
            "querystring_auth": True,
            "file_overwrite": False,
            # An unreachable or hung store fails a request within about S3_TIMEOUT_S x 3 (an
            # upload then answers 503 + Retry-After; nothing is half-stored), not botocore's 60 s.
            "client_config": _botocore_config(
                connect_timeout=S3_TIMEOUT_S, read_timeout=S3_TIMEOUT_S,
                retries={"max_attempts": 3, "mode": "standard"}),
        },
    }
# Uploads whose intake message or worker was lost are published again: every 60 s,
# https://crontab.guru/#*_*_*_*_*
CELERY_BEAT_SCHEDULE["reap-stuck-intake"] = {
    "task": "submissions.reap_stuck_intake",
    "schedule": env.float("INTAKE_REAPER_INTERVAL_S", default=60.0),
}
# Staging folders of uploads dropped mid-way are removed hourly: https://crontab.guru/#0_*_*_*_*
CELERY_BEAT_SCHEDULE["sweep-upload-staging"] = {
    "task": "submissions.sweep_staging",
    "schedule": 3600.0,
}
