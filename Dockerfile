# The tachyon image: `tachyon serve` and `tachyon route` (deploy/kubernetes/ runs it).
#   docker build -t tachyon:latest .
#   docker run -p 8080:8080 -v tachyon-models:/models tachyon:latest
# The build stage runs the project's own scripts/setup.sh (Debian 12 packages, the Python tools)
# and scripts/build.sh release; the runtime stage holds the binary, its shared libraries and
# scripts/fetch_model.sh (which fetches the default model into $XDG_CACHE_HOME/tachyon/models).
FROM debian:12 AS build
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /src
COPY . .
# setup.sh ends by fetching the test models; offline it says so and goes on.
RUN scripts/setup.sh && scripts/build.sh release tachyon

FROM debian:12
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends \
      libpcre2-8-0 libutf8proc2 libxxhash0 libcurl4 ca-certificates \
      python3 python3-pip curl \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 tachyon \
 && useradd --system --uid 10001 --gid tachyon --home-dir /models --no-create-home tachyon \
 && mkdir -p /models && chown tachyon:tachyon /models
COPY --from=build /src/build/tachyon /usr/local/bin/tachyon
COPY scripts/fetch_model.sh /opt/tachyon/scripts/fetch_model.sh
ENV XDG_CACHE_HOME=/models
VOLUME /models
USER tachyon
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=5s --start-period=300s --retries=3 \
  CMD curl -fsS http://127.0.0.1:8080/health || exit 1
ENTRYPOINT ["tachyon"]
CMD ["serve", "--model", "/models/tachyon/models/SmolLM2-135M-Instruct.Q4_1.gguf", "--host", "0.0.0.0", "--port", "8080"]
