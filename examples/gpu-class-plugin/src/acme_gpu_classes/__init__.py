"""An operator's GPU-class rule table, installed next to tau (researchers) and into a derived controller image."""
