"""Agent hosts: ``slm setup HOST`` writes slm into a host's own files
(:mod:`slm.hosts.setup`, one module per host, docs/hosts.md). This package's own import is
empty on purpose: the hook command a host runs on every prompt imports below it, and pays
for nothing it does not use."""
