"""The site's WSGI application plus a static route for bench_scale's floor.

``gunicorn 'devtools.bench.wsgi:make_application("/tmp/floor")'`` serves the site as
``config.wsgi`` does, and every file under that folder at ``/__floor__/<name>`` through WhiteNoise
(the same static path that serves /static/ in production): the same bytes as a page, served as a
file by the same server, which is what "static-file speed" is measured against.
"""

from whitenoise import WhiteNoise

from config.wsgi import application as site_application

FLOOR_PREFIX = "/__floor__/"


def make_application(floor_dir: str):
    return WhiteNoise(site_application, root=floor_dir, prefix=FLOOR_PREFIX, autorefresh=False)
