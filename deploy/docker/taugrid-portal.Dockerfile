# The taugrid-portal image: the read-only Portal, Stellar pages and the metrics offload sidecar
# (rendered when a run sets metrics.offload.enabled; point TAU_METRICS_OFFLOAD_IMAGE at this image by digest).
#   docker build -f deploy/docker/taugrid-portal.Dockerfile -t taugrid-portal:dev .
# Non-root (65532); nothing is written to the image at run time: the experiment store and /tmp are volumes
# (the chart mounts both), so the pod runs with readOnlyRootFilesystem: true.
# Linted by tests/docs/test_dockerfiles.py (hadolint); built only by `nox -s images` where Docker exists.

FROM python:3.12-slim AS build
WORKDIR /src
COPY tau-core/ tau-core/
COPY tau-portal/ tau-portal/
RUN pip wheel --no-cache-dir --wheel-dir /wheels ./tau-core ./tau-portal

FROM python:3.12-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp \
    TAU_DATA_DIR=/tmp/tau
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["taugrid-portal"]
CMD ["--help"]
