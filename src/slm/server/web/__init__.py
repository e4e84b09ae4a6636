"""The web page that ``slm serve`` and ``slm ui`` serve (docs/web.md): routes in
:mod:`~slm.server.web.pages`, what the pages show in :mod:`~slm.server.web.views`, Jinja2
templates and one stylesheet beside them."""
