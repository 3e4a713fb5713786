"""Protobuf and gRPC code generation with Debian's protoc and plugins (no downloaded rules)."""

def system_cc_grpc_library(name, src, deps = [], grpc = True, **kwargs):
    """C++ messages (and gRPC stubs when grpc = True) for one .proto file of this repository."""
    base = src[:-len(".proto")]
    outs = [base + ".pb.h", base + ".pb.cc"]
    cmd = "protoc --proto_path=. --cpp_out=$(GENDIR)"
    if grpc:
        outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
        cmd += " --grpc_out=$(GENDIR) --plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin)"
    cmd += " $(location %s)" % src
    native.genrule(name = name + "_codegen", srcs = [src], outs = outs, cmd = cmd)
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps + ["@system//:protobuf"] + (["@system//:grpc++"] if grpc else []),
        **kwargs
    )
