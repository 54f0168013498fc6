# The project's image: every Airflow role, the Spark master and workers (driver and executors share one
# environment), and the Kafka brokers where Apache Kafka's own image cannot be pulled.
#   docker build -t srm:latest .                                   (base: debian:bookworm-slim)
#   docker build --build-arg BASE_IMAGE=srm-base:bookworm -t srm:latest .   (base built here, offline:
#                                                                   conf/compose/base-image.sh)
# Pin the base by digest where a registry is reachable: BASE_IMAGE=debian:bookworm-slim@sha256:<digest>.
ARG BASE_IMAGE=debian:bookworm-slim

# --- Kafka broker, tools and MirrorMaker 2 jars, resolved with Maven as `make jars` does ---------------
FROM ${BASE_IMAGE} AS jars
# CAs of a TLS-intercepting proxy between the build and the registries (`make image` copies the host's
# /usr/local/share/ca-certificates to conf/compose/ca-certificates; empty elsewhere)
COPY conf/compose/ca-certificates/ /usr/local/share/ca-certificates/
RUN update-ca-certificates >/dev/null
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt PIP_CERT=/etc/ssl/certs/ca-certificates.crt
RUN apt-get update -q \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends maven default-jdk-headless \
    && rm -rf /var/lib/apt/lists/*
COPY conf/jvm/kafka/pom.xml /build/pom.xml
RUN mvn -B -q -f /build/pom.xml dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=/jars/kafka \
    && touch /jars/kafka/.resolved && rm -rf /root/.m2

# --- the project ----------------------------------------------------------------------------------------
FROM ${BASE_IMAGE}
# CAs of a TLS-intercepting proxy between the build and the registries (`make image` copies the host's
# /usr/local/share/ca-certificates to conf/compose/ca-certificates; empty elsewhere)
COPY conf/compose/ca-certificates/ /usr/local/share/ca-certificates/
RUN update-ca-certificates >/dev/null
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt PIP_CERT=/etc/ssl/certs/ca-certificates.crt
RUN apt-get update -q \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        python3 python3-venv default-jre-headless procps tini \
    && rm -rf /var/lib/apt/lists/*
ARG UV_VERSION=0.13.8
ARG SRM_UID=50000
ENV SRM_HOME=/opt/srm \
    VIRTUAL_ENV=/opt/srm/.venv \
    PATH=/opt/srm/.venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    SPARK_HOME=/opt/srm/.venv/lib/python3.11/site-packages/pyspark \
    JAVA_HOME=/usr/lib/jvm/default-java \
    PYTHONUNBUFFERED=1
WORKDIR /opt/srm
RUN useradd --uid ${SRM_UID} --gid 0 --home-dir /opt/srm --no-create-home --shell /bin/bash srm
# Dependencies first (the longest layer, rebuilt only when the lock changes); pyspark after the rest,
# as `make install` does: the Spark provider's pyspark-client writes into the same folder.
COPY requirements.lock ./
# The packages are compiled to bytecode as they are installed (uv writes none unless asked; the image's
# user cannot write it at run time, so each process would compile its imports from source).
RUN python3 -m venv .venv \
    && .venv/bin/python -m pip install -q --no-cache-dir uv==${UV_VERSION} \
    && uv pip install -q --no-cache --compile-bytecode --python .venv/bin/python -r requirements.lock \
    && uv pip install -q --no-cache --compile-bytecode --python .venv/bin/python --no-deps --reinstall-package pyspark pyspark==4.3.0 \
    && python -c 'import pyspark, airflow, confluent_kafka, psycopg2; assert pyspark.__version__ == "4.3.0"'
COPY --from=jars /jars/kafka .cache/jvm/kafka
COPY pyproject.toml README.md ./
COPY srm srm
COPY include include
COPY spark spark
COPY dags dags
COPY plugins plugins
COPY conf conf
RUN uv pip install -q --no-cache --python .venv/bin/python --no-deps -e . \
    && mkdir -p data/warehouse data/plan-logs .local /opt/airflow /var/lib/kafka/data /var/lib/kafka/config \
    && chown -R srm:0 data .local /opt/airflow /var/lib/kafka && chmod -R g+w data .local /opt/airflow /var/lib/kafka \
    && install -d -o srm -g 0 -m 750 secrets
USER srm
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["srm-control", "--help"]
