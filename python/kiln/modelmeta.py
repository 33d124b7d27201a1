"""InferenceSession.get_modelmeta(): ONNX Runtime's ModelMetadata.

For an .onnx model the fields come from the ModelProto, read with the `onnx` package (without
external data). A compiled .kiln artifact (`kiln compile`) holds no ModelProto but copies the
model's facts into its metadata ("model.producer_name", ...), which `from_artifact` reads from
the native session (kiln::Session::metadata).
"""

# The first bytes of a .kiln artifact (runtime/artifact_format.h).
KILN_ARTIFACT_MAGIC = b"\x89KILN\r\n\x1a"


class ModelMetadata:
    def __init__(self, producer_name="", graph_name="", domain="", description="", graph_description="",
                 version=0, custom_metadata_map=None):
        self.producer_name = producer_name
        self.graph_name = graph_name
        self.domain = domain
        self.description = description
        self.graph_description = graph_description
        self.version = version
        self.custom_metadata_map = dict(custom_metadata_map or {})

    def __repr__(self):
        return (f"ModelMetadata(producer_name={self.producer_name!r}, graph_name={self.graph_name!r}, "
                f"domain={self.domain!r}, version={self.version})")


def is_artifact(path):
    with open(path, "rb") as f:
        return f.read(len(KILN_ARTIFACT_MAGIC)) == KILN_ARTIFACT_MAGIC


def from_onnx(path):
    try:
        import onnx
    except ImportError as e:
        raise ImportError("get_modelmeta() of an .onnx model reads it with the onnx package: "
                          "pip install onnx") from e
    m = onnx.load(path, load_external_data=False)
    return ModelMetadata(
        producer_name=m.producer_name, graph_name=m.graph.name, domain=m.domain, description=m.doc_string,
        graph_description=m.graph.doc_string, version=m.model_version,
        custom_metadata_map={p.key: p.value for p in m.metadata_props})


# Artifact metadata keys (compiler/compile_artifact.cc: "model." + frontend::model_facts' keys).
_ARTIFACT_FIELDS = {"model.producer_name": "producer_name", "model.graph_name": "graph_name",
                    "model.domain": "domain", "model.doc_string": "description",
                    "model.graph_doc_string": "graph_description"}


def from_artifact(native_session):
    """The metadata of a .kiln artifact's session: the ONNX model's fields that `kiln compile`
    copied into the artifact."""
    facts = native_session.metadata()
    meta = ModelMetadata(**{field: facts[key] for key, field in _ARTIFACT_FIELDS.items() if key in facts})
    if "model.model_version" in facts:
        meta.version = int(facts["model.model_version"])
    meta.custom_metadata_map = {k[len("model.metadata."):]: v for k, v in facts.items()
                                if k.startswith("model.metadata.")}
    return meta
