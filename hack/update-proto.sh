#!/usr/bin/env bash
# Regenerates the Go stubs of Karmada's scheduler-estimator gRPC service
# (internal/estimator/karmadapb) from the .proto files next to them, with
# protoc (hack/ensure-deb.sh) and the protoc-gen-go(-grpc) versions of
# hack/tools/go.mod. The generated files name no protoc version, so the
# output depends only on the sources and the plugins.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "${root}/hack/ensure-deb.sh" protoc protobuf-compiler
"${root}/hack/tools.sh"
bin="${PHALANX_TOOLS_BIN:-${root}/bin/tools}"

cd "${root}/internal/estimator"
protoc -I . \
  --plugin=protoc-gen-go="${bin}/protoc-gen-go" --go_out=. --go_opt=paths=source_relative \
  --plugin=protoc-gen-go-grpc="${bin}/protoc-gen-go-grpc" --go-grpc_out=. --go-grpc_opt=paths=source_relative \
  karmadapb/estimator.proto karmadapb/service.proto
# protoc's own version is printed in a header comment; drop it so that any
# protoc release gives the same files.
sed -i '/^\/\/ - protoc  /d;/^\/\/ 	protoc  /d' karmadapb/*.pb.go
