# Switchyard container image: the `switchyard` and `bench` binaries, static,
# on `scratch`.
#
# Only the build stage needs a base image (golang:1.26, pulled at build
# time). The final image is FROM scratch: nothing is pulled when it runs, and
# it holds no shell, no package manager and no curl; health checks use
# `/switchyard probe URL` or `/bench probe -url URL` instead. Both binaries
# are static (CGO_ENABLED=0 below): scratch has no libc.
# switchyard/internal/composecheck checks both facts.
#
#   docker build -t switchyard:local .
#   docker compose up --build            # see compose.yaml
#
# The repository is a go.work workspace, so each binary is built from its own
# module directory with the workspace in effect, with the build tags of
# `make build` (grpcnotrace: see the Makefile; a smaller binary, less RSS).

FROM golang:1.26 AS build

# go.work asks for go 1.26.8; if this golang:1.26 image carries an older
# 1.26.x, let the go command fetch the exact toolchain instead of failing
# (the official images default to GOTOOLCHAIN=local).
ENV GOTOOLCHAIN=auto \
    CGO_ENABLED=0

WORKDIR /src
COPY . .

RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    set -eux; \
    mkdir -p /out/root/tmp /out/owned/data; \
    cd /src/switchyard && go build -trimpath -tags=grpcnotrace -ldflags='-s -w' -o /out/root/switchyard ./cmd/switchyard; \
    cd /src/bench && go build -trimpath -tags=grpcnotrace -ldflags='-s -w' -o /out/root/bench ./cmd/bench; \
    chmod 1777 /out/root/tmp

FROM scratch

# CA roots, so upstreams over https:// can be verified.
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
# /switchyard, /bench and a world-writable /tmp, owned by root.
COPY --from=build /out/root/ /
# /data is the NATS JetStream store (`switchyard nats --store /data`); a named
# volume mounted there starts out owned by the non-root user below.
COPY --from=build --chown=65532:65532 /out/owned/ /

# No config is baked in: compose.yaml mounts one at
# /etc/switchyard/switchyard.yaml (top-level `configs:`, inline content) and
# passes --config; with plain `docker run`, bind-mount a file and pass
# --config (or SWITCHYARD_CONFIG).

USER 65532:65532

# Ports: 8080 edge (MCP over HTTP), 4222 NATS, 9000 bench fixture.
EXPOSE 8080 4222 9000

# Every service in compose.yaml sets its own command; by default print usage.
CMD ["/switchyard", "help"]
