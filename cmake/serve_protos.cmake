# The serve layer's generated protobuf code (minimal: Triton's model configuration only).
# model_config.proto is compiled with src/serve/proto as its import root (so other protos there
# can `import "model_config.proto"` as Triton's grpc_service.proto does) into
# build/serve_protos/serve/proto/; both "serve/proto/model_config.pb.h" and "model_config.pb.h"
# resolve.
set(KILN_SERVE_PROTO_OUT ${CMAKE_CURRENT_BINARY_DIR}/serve_protos)
file(MAKE_DIRECTORY ${KILN_SERVE_PROTO_OUT}/serve/proto)
# APPEND_PATH: the proto's own folder is the import root (CMake's default would nest the output
# under the proto's path relative to the source dir).
protobuf_generate(TARGET kiln_serve LANGUAGE cpp APPEND_PATH
  PROTOS ${CMAKE_CURRENT_SOURCE_DIR}/src/serve/proto/model_config.proto
  PROTOC_OUT_DIR ${KILN_SERVE_PROTO_OUT}/serve/proto)
target_include_directories(kiln_serve PUBLIC ${KILN_SERVE_PROTO_OUT} ${KILN_SERVE_PROTO_OUT}/serve/proto)
