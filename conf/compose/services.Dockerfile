# PostgreSQL, Prometheus (and Redis, for the celery profile) of the compose stack where no registry is reachable
# (conf/compose/offline.yaml): Debian's packages on the base built by conf/compose/base-image.sh.
# Reads the official postgres image's POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB.
ARG BASE_IMAGE=srm-base:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update -q \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql-15 prometheus redis-server tini \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /var/lib/postgresql/data /var/run/postgresql \
    && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql \
    && install -d -o 65534 -g 0 -m 770 /prometheus
COPY conf/compose/postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint
ENV PGDATA=/var/lib/postgresql/data PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
USER postgres
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["postgres-entrypoint"]
