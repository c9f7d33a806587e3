"""Registering the GitHub App from its manifest, the first time ``serve`` runs.

``serve`` with no App credentials (no config file, no ``github`` section, or one without
``app_id`` whose key and secret files do not exist yet) serves a page that registers the
App through GitHub's manifest flow, saves its credentials beside the config, and then
starts the service in the same process. The modules:

- ``manifest``: the manifest and the flow's URLs (pure);
- ``registrar``: start (``state``) and complete (code conversion, saving) a registration;
- ``files``: the first config, the secrets (0600 in a 0700 directory), the config edit;
- ``page``: the registration web app;
- ``run``: what ``serve`` runs: the page, then the service.
"""
