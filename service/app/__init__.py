"""The application: the composition root (``daemon``), its roles and how they start and
stop, configuration reload, the App's identity, first run and registration (``setup``),
retention, and the HTTP app with its status page. Everything else is composed here; no
package below imports this one."""
