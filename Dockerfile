# llmsweep in a container (deploy/kubernetes/ runs it as the shards of an
# Indexed Job). Build: docker build -t llmsweep .
#
# Stage 1: the release binary.
FROM rust:1-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin llmsweep \
    && strip target/release/llmsweep

# Stage 2: glibc and nothing else (no shell, no package manager), as a
# non-root user (uid 65532). TLS uses rustls with its own roots: no CA bundle needed.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/llmsweep /usr/local/bin/llmsweep
USER 65532:65532
WORKDIR /results
ENTRYPOINT ["/usr/local/bin/llmsweep"]
CMD ["--help"]
