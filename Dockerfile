# syntax=docker/dockerfile:1
# switchyard as a container: a static binary (CGO_ENABLED=0: no libc, no libzmq,
# the ZeroMQ stack is pure Go) on distroless/static, which has no shell and no libc
# but does have /tmp (the built-in mock engines' ipc sockets) and a nonroot user.
#
#   docker build -t switchyard .
#   docker run --rm -p 8000:8000 switchyard            # built-in mock engines
#   docker run --rm -p 8000:8000 -p 29550:29550 switchyard serve \
#       --handshake-address tcp://0.0.0.0:29550 --data-parallel-size 2 \
#       --engine-transport tcp --engine-bind-host HOST_IP_THE_ENGINES_REACH
#
# deploy/deploy_test.go checks this file's structure and that the same build
# command gives a binary with no dynamic dependencies that runs with an empty
# environment.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/switchyard ./cmd/switchyard

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/switchyard /usr/local/bin/switchyard
COPY LICENSE /usr/share/doc/switchyard/LICENSE
# In a container the listeners must not be loopback-only.
ENV SWITCHYARD_HTTP_ADDRESS=0.0.0.0:8000 \
    SWITCHYARD_CLIENT_ADDRESS=tcp://0.0.0.0:5570
USER nonroot:nonroot
# 8000 HTTP (OpenAI API, /metrics, /health), 5570 msgpack clients, 29550 engine handshake
EXPOSE 8000 5570 29550
ENTRYPOINT ["/usr/local/bin/switchyard"]
CMD ["serve"]
