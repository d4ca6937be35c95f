# syntax=docker/dockerfile:1
# IncidentMind in a container: built with the Rust image, run as a non-root user on Debian slim.
# The root filesystem can be read-only: the only writes go to the database directory /data (a
# volume; SQLite's -wal and -shm files sit beside the database) and to /tmp (mount a tmpfs).
# The built-in embedding model is copied into the image (models/, 45 MB).
#
#   docker build -t incidentmind .
#   docker run --read-only --tmpfs /tmp -v incidentmind-data:/data -p 3000:3000 incidentmind
#
# compose.yaml runs it with Prometheus and Alertmanager (docs/api.md: "Try alert ingest for real").

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# Cargo's registry and the target directory are build caches, so a rebuild after a source change
# takes minutes, not the ~11 of a clean release build on 2 cores. The binary is copied out of the
# cached target directory, which is not part of the image layer.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin incidentmind \
    && install -m 0755 target/release/incidentmind /usr/local/bin/incidentmind

FROM debian:bookworm-slim AS run
# ca-certificates: TLS to a model server or an embeddings endpoint (rustls reads the system roots).
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 incidentmind \
    && useradd --system --uid 10001 --gid 10001 --home-dir /data --no-create-home \
       --shell /usr/sbin/nologin incidentmind \
    && mkdir -p /data \
    && chown 10001:10001 /data
COPY --from=build /usr/local/bin/incidentmind /usr/local/bin/incidentmind
COPY models/ /app/models/
WORKDIR /app
# Every option also reads its environment variable (README: Configuration). Listen on all
# interfaces inside the container; the database lives on the /data volume; JSON log lines.
ENV INCIDENTMIND_BIND=0.0.0.0:3000 \
    INCIDENTMIND_DATABASE_URL=/data/incidentmind.db \
    INCIDENTMIND_EMBEDDINGS_MODEL_DIR=/app/models/all-MiniLM-L6-v2 \
    INCIDENTMIND_LOG_FORMAT=json \
    RUST_LOG=incidentmind=info,tower_http=info
VOLUME ["/data"]
USER 10001:10001
EXPOSE 3000
# SIGTERM: stop accepting connections, let requests in flight finish for up to
# --shutdown-grace-secs (20 s); give `docker stop` longer than that (compose: stop_grace_period).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/incidentmind"]
