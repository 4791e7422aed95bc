# syntax=docker/dockerfile:1
# Image with the phalanx binaries: /phalanx-scheduler (entrypoint),
# /phalanx-controller and /phalanx-global (the Karmada global tier). Built by `make image`, which tags it with the chart's
# appVersion (the tag charts/phalanx and manifests/ name) and passes VERSION;
# the binaries are stamped with hack/ldflags.sh, as `make build` stamps them.

FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=v0.0.0-dev
WORKDIR /src

# Modules change less often than code: keep them in their own layer.
COPY go.mod go.sum ./
RUN go mod download

COPY . .
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath \
      -ldflags "-s -w $(bash hack/ldflags.sh "${VERSION}")" \
      -o /out/ ./cmd/phalanx-scheduler ./cmd/phalanx-controller ./cmd/phalanx-global

FROM gcr.io/distroless/static:nonroot
COPY --from=builder /out/phalanx-scheduler /phalanx-scheduler
COPY --from=builder /out/phalanx-controller /phalanx-controller
COPY --from=builder /out/phalanx-global /phalanx-global
USER 65532:65532
ENTRYPOINT ["/phalanx-scheduler"]
