# The tau CLI image: every command root (the `tau` meta-package's) and the Kusto telemetry sink, for in-cluster
# tau work (the lifecycle recorder's image in the taugrid-core chart, dataset and model workers of `tau data`,
# scripted `tau run` from CI pods).
#   docker build -f deploy/docker/tau-cli.Dockerfile -t tau:dev .
# Non-root (65532); HOME, TAU_DATA_DIR and TAU_CONFIG_DIR live under /tmp (an emptyDir), so the root
# filesystem can be read-only. Linted by tests/docs/test_dockerfiles.py (hadolint).

FROM python:3.12-slim AS build
WORKDIR /src
COPY tau-core/ tau-core/
COPY tau-plugins/ tau-plugins/
RUN pip wheel --no-cache-dir --wheel-dir /wheels ./tau-core \
        ./tau-plugins/tau-cluster ./tau-plugins/tau-data ./tau-plugins/tau-logs ./tau-plugins/tau-python \
        ./tau-plugins/tau-run ./tau-plugins/tau-serve ./tau-plugins/tau-version ./tau-plugins/tau-workspace \
        ./tau-plugins/tau-kusto

FROM python:3.12-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp \
    TAU_DATA_DIR=/tmp/tau \
    TAU_CONFIG_DIR=/tmp/tau-config
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER 65532:65532
ENTRYPOINT ["tau"]
CMD ["--help"]
