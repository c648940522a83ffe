"""Ready-made simulated clusters (scenarios) that tests load with one call."""
