"""The read-only TauGrid Portal (``taugrid-portal portal serve``): starlette + uvicorn over a watch cache."""
