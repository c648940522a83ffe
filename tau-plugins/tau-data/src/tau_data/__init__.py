"""tau data: dataset and model registries."""
