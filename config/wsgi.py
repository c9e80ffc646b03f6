import os

from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.utils.module_loading import import_string

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()
# The applications in front of Django (settings.WSGI_FRONTS, the first outermost): named, as
# MIDDLEWARE names its classes, so config imports no app.
for _front in reversed(settings.WSGI_FRONTS):
    application = import_string(_front)(application)
