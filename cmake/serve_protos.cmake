# The serve layer's protobuf/gRPC code, generated at build time into <build>/gen/serve/proto/ and
# compiled into kiln_serve. Included by the top-level CMakeLists.txt after kiln_serve is defined.
#   src/serve/proto/model_config.proto  -> model_config.pb.{h,cc}            (Triton's ModelConfig)
#   src/serve/proto/grpc_service.proto  -> grpc_service.pb.{h,cc}, .grpc.pb.{h,cc} (KServe v2 gRPC)
#   src/serve/proto/health.proto        -> health.pb.{h,cc}, .grpc.pb.{h,cc}      (grpc.health.v1)
# Sources include them as "serve/proto/<name>.pb.h" (or bare "<name>.pb.h": both folders are on
# the include path); the protos import each other as "serve/proto/<name>.proto" (proto root = src/).
find_program(KILN_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
if(TARGET protobuf::protoc)
  set(KILN_PROTOC $<TARGET_FILE:protobuf::protoc>)
else()
  find_program(KILN_PROTOC protoc REQUIRED)
endif()

set(KILN_SERVE_PROTO_ROOT ${CMAKE_CURRENT_SOURCE_DIR}/src)
set(KILN_SERVE_GEN_DIR ${CMAKE_CURRENT_BINARY_DIR}/gen)
file(MAKE_DIRECTORY ${KILN_SERVE_GEN_DIR}/serve/proto)

# kiln_serve_proto(<name> [GRPC]): generates and adds serve/proto/<name>.proto's C++ code.
function(kiln_serve_proto name)
  cmake_parse_arguments(ARG "GRPC" "" "DEPENDS" ${ARGN})
  set(proto ${KILN_SERVE_PROTO_ROOT}/serve/proto/${name}.proto)
  set(out ${KILN_SERVE_GEN_DIR}/serve/proto/${name})
  set(outputs ${out}.pb.cc ${out}.pb.h)
  set(plugin_args "")
  if(ARG_GRPC)
    list(APPEND outputs ${out}.grpc.pb.cc ${out}.grpc.pb.h)
    set(plugin_args --grpc_out=${KILN_SERVE_GEN_DIR} --plugin=protoc-gen-grpc=${KILN_GRPC_CPP_PLUGIN})
  endif()
  set(dep_protos "")
  foreach(dep ${ARG_DEPENDS})
    list(APPEND dep_protos ${KILN_SERVE_PROTO_ROOT}/serve/proto/${dep}.proto)
  endforeach()
  add_custom_command(
    OUTPUT ${outputs}
    COMMAND ${KILN_PROTOC} -I ${KILN_SERVE_PROTO_ROOT} --cpp_out=${KILN_SERVE_GEN_DIR} ${plugin_args} ${proto}
    DEPENDS ${proto} ${dep_protos} ${KILN_GRPC_CPP_PLUGIN}
    COMMENT "protoc serve/proto/${name}.proto"
    VERBATIM)
  list(FILTER outputs INCLUDE REGEX "\\.cc$")
  # Generated code is not ours to fix: no warnings from it.
  set_source_files_properties(${outputs} PROPERTIES COMPILE_OPTIONS "-w")
  target_sources(kiln_serve PRIVATE ${outputs})
endfunction()

kiln_serve_proto(model_config)
kiln_serve_proto(grpc_service GRPC DEPENDS model_config)
kiln_serve_proto(health GRPC)  # grpc.health.v1 (serve/grpc_health.h)
target_include_directories(kiln_serve PUBLIC ${KILN_SERVE_GEN_DIR} ${KILN_SERVE_GEN_DIR}/serve/proto)
