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

from service.setup.manifest import (
    MANIFEST,
    build_manifest,
    install_url,
    public_url_for,
    registration_url,
)
from service.setup.page import create_setup_app
from service.setup.registrar import Registered, Registrar, RegistrationError, Started
from service.setup.run import describe_pending, register

__all__ = [
    "MANIFEST",
    "Registered",
    "Registrar",
    "RegistrationError",
    "Started",
    "build_manifest",
    "create_setup_app",
    "describe_pending",
    "install_url",
    "public_url_for",
    "register",
    "registration_url",
]
