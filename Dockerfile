# syntax=docker/dockerfile:1
# Image with both phalanx binaries: /phalanx-scheduler (entrypoint) and
# /phalanx-controller. Built by `make image`; VERSION is stamped into
# github.com/phalanx-sched/phalanx/internal/version.Version.

FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src

# Modules change less often than code: keep them in their own layer.
COPY go.mod go.sum ./
RUN go mod download

COPY . .
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath \
      -ldflags "-s -w -X github.com/phalanx-sched/phalanx/internal/version.Version=${VERSION}" \
      -o /out/ ./cmd/phalanx-scheduler ./cmd/phalanx-controller

FROM gcr.io/distroless/static:nonroot
COPY --from=builder /out/phalanx-scheduler /phalanx-scheduler
COPY --from=builder /out/phalanx-controller /phalanx-controller
USER 65532:65532
ENTRYPOINT ["/phalanx-scheduler"]
