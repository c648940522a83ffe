"""``tau cluster``: install, upgrade, validate and uninstall the TauGrid Helm distribution."""
