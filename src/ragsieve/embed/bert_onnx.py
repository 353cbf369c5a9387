"""Write a BERT encoder with mean pooling as an ONNX graph straight from its safetensors weights.

This is the torch-free route to the ONNX embedder: the graph is assembled node by node with
``onnx.helper`` from the weights in ``model.safetensors`` (read with numpy), so a core install
without torch or transformers can run the bundled all-MiniLM-L6-v2. It covers the BERT family
that sentence-transformers models such as MiniLM, BGE-small and E5-small use (absolute positions,
GELU, post-layer-norm); other architectures go through the torch exporter in
:mod:`ragsieve.embed.onnx`. Inputs and outputs match that exporter's graph, so either file serves:
``embedding`` (the mean-pooled vector) and ``token_embeddings`` (the last layer's token vectors,
from which the embedder pools each sentence of a passage in the passage's own forward pass).
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

import numpy as np

from ragsieve.errors import ModelError

# The graph's second output: the last layer's vector of every token (batch, sequence, hidden).
TOKEN_OUTPUT = "token_embeddings"

_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": None, "I64": np.int64, "F64": np.float64}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """All tensors of a ``.safetensors`` file as float32/int64 numpy arrays (no torch, no safetensors)."""
    with path.open("rb") as handle:
        (size,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(size))
        data = handle.read()
    tensors: dict[str, np.ndarray] = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        begin, end = meta["data_offsets"]
        raw = data[begin:end]
        if meta["dtype"] == "BF16":
            # bfloat16 is the top half of a float32.
            halves = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
            array = halves.view(np.float32)
        elif meta["dtype"] in _DTYPES:
            array = np.frombuffer(raw, dtype=_DTYPES[meta["dtype"]])
        else:
            raise ModelError(f"{path}: tensor {name} has dtype {meta['dtype']}, which this exporter cannot read")
        tensors[name] = array.reshape(meta["shape"])
    return tensors


def is_supported(model_dir: Path) -> bool:
    """Whether :func:`export_bert_to_onnx` can write the graph of ``model_dir``."""
    config_path = model_dir / "config.json"
    if not config_path.is_file() or not (model_dir / "model.safetensors").is_file():
        return False
    config = json.loads(config_path.read_text(encoding="utf-8"))
    return (
        config.get("model_type") == "bert"
        and config.get("position_embedding_type", "absolute") == "absolute"
        and config.get("hidden_act", "gelu") == "gelu"
    )


class _Graph:
    """A small builder that names nodes and initializers uniquely."""

    def __init__(self, helper: Any, numpy_helper: Any) -> None:
        self.helper = helper
        self.numpy_helper = numpy_helper
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def name(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def const(self, value: np.ndarray, hint: str = "c") -> str:
        name = self.name(hint)
        self.initializers.append(self.numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], hint: str | None = None, **attrs: Any) -> str:
        out = self.name(hint or op_type.lower())
        self.nodes.append(self.helper.make_node(op_type, inputs, [out], **attrs))
        return out


def _weights(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Strip a leading ``bert.`` so both BertModel and task-head checkpoints read the same."""
    return {name.removeprefix("bert."): array for name, array in tensors.items()}


def build_bert_graph(model_dir: Path) -> Any:
    """The ONNX ``ModelProto`` of the encoder in ``model_dir`` followed by masked mean pooling
    (outputs ``embedding`` and :data:`TOKEN_OUTPUT`)."""
    try:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as exc:
        raise ModelError("writing the ONNX embedder graph needs the onnx package: pip install onnx") from exc
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    w = _weights(read_safetensors(model_dir / "model.safetensors"))
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    head_dim = hidden // heads
    eps = float(config.get("layer_norm_eps", 1e-12))
    g = _Graph(helper, numpy_helper)

    def f32(name: str) -> np.ndarray:
        try:
            return w[name].astype(np.float32)
        except KeyError as exc:
            raise ModelError(f"{model_dir}: weight {name} is missing; is this a BERT checkpoint?") from exc

    def linear(x: str, prefix: str) -> str:
        weight = g.const(f32(f"{prefix}.weight").T, prefix + ".weight")
        return g.op("Add", [g.op("MatMul", [x, weight]), g.const(f32(f"{prefix}.bias"), prefix + ".bias")])

    def layer_norm(x: str, prefix: str) -> str:
        scale, bias = g.const(f32(f"{prefix}.weight")), g.const(f32(f"{prefix}.bias"))
        return g.op("LayerNormalization", [x, scale, bias], axis=-1, epsilon=eps)

    i64 = np.int64
    axis0, axis1, axis12, axis2 = (g.const(np.array(a, dtype=i64)) for a in ([0], [1], [1, 2], [2]))
    # Embeddings: word + absolute position + token type, then layer norm.
    seq_len = g.op("Gather", [g.op("Shape", ["input_ids"]), g.const(np.array(1, dtype=i64))], axis=0)
    positions = g.op("Range", [g.const(np.array(0, dtype=i64)), seq_len, g.const(np.array(1, dtype=i64))])
    positions = g.op("Unsqueeze", [positions, axis0])
    emb = g.op("Gather", [g.const(f32("embeddings.word_embeddings.weight")), "input_ids"], axis=0)
    emb = g.op("Add", [emb, g.op("Gather", [g.const(f32("embeddings.position_embeddings.weight")), positions])])
    token_types = g.op("Gather", [g.const(f32("embeddings.token_type_embeddings.weight")), "token_type_ids"])
    emb = g.op("Add", [emb, token_types])
    h = layer_norm(emb, "embeddings.LayerNorm")

    # Additive attention mask: 0 where attended, the float32 minimum where padded (as transformers does).
    mask_f = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    one = g.const(np.array(1.0, dtype=np.float32))
    big_negative = g.const(np.array(np.finfo(np.float32).min, dtype=np.float32))
    additive = g.op("Mul", [g.op("Sub", [one, g.op("Unsqueeze", [mask_f, axis12])]), big_negative])
    split_heads = g.const(np.array([0, 0, heads, head_dim], dtype=i64))
    merge_heads = g.const(np.array([0, 0, hidden], dtype=i64))
    scale = g.const(np.array(1.0 / math.sqrt(head_dim), dtype=np.float32))
    half = g.const(np.array(0.5, dtype=np.float32))
    inv_sqrt2 = g.const(np.array(1.0 / math.sqrt(2.0), dtype=np.float32))

    for i in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{i}"

        def heads_of(x: str, perm: list[int]) -> str:
            return g.op("Transpose", [g.op("Reshape", [x, split_heads])], perm=perm)

        q = heads_of(linear(h, f"{p}.attention.self.query"), [0, 2, 1, 3])
        k = heads_of(linear(h, f"{p}.attention.self.key"), [0, 2, 3, 1])
        v = heads_of(linear(h, f"{p}.attention.self.value"), [0, 2, 1, 3])
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), scale]), additive])
        context = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        context = g.op("Reshape", [g.op("Transpose", [context], perm=[0, 2, 1, 3]), merge_heads])
        attended = g.op("Add", [linear(context, f"{p}.attention.output.dense"), h])
        h = layer_norm(attended, f"{p}.attention.output.LayerNorm")
        inner = linear(h, f"{p}.intermediate.dense")
        # exact GELU, x * 0.5 * (1 + erf(x / sqrt 2)), which BERT's "gelu" is
        erf = g.op("Erf", [g.op("Mul", [inner, inv_sqrt2])])
        gelu = g.op("Mul", [g.op("Mul", [inner, half]), g.op("Add", [one, erf])])
        h = layer_norm(g.op("Add", [linear(gelu, f"{p}.output.dense"), h]), f"{p}.output.LayerNorm")

    # The last layer's token vectors, an output of their own (sentence vectors are pooled from
    # spans of them), then their mean over the attended tokens.
    g.nodes.append(helper.make_node("Identity", [h], [TOKEN_OUTPUT]))
    weights = g.op("Unsqueeze", [mask_f, axis2])
    summed = g.op("ReduceSum", [g.op("Mul", [h, weights]), axis1], keepdims=0)
    counts = g.op("Max", [g.op("ReduceSum", [weights, axis1], keepdims=0), g.const(np.array(1e-9, dtype=np.float32))])
    g.nodes.append(helper.make_node("Div", [summed, counts], ["embedding"]))

    def int_input(name: str) -> Any:
        return helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])

    graph = helper.make_graph(
        g.nodes,
        "bert_mean_pooled",
        [int_input("input_ids"), int_input("attention_mask"), int_input("token_type_ids")],
        [
            helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", hidden]),
            helper.make_tensor_value_info(TOKEN_OUTPUT, TensorProto.FLOAT, ["batch", "sequence", hidden]),
        ],
        initializer=g.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="ragsieve")
    model.ir_version = min(model.ir_version, 8)  # readable by every onnxruntime the core allows
    onnx.checker.check_model(model)
    return model


def export_bert_to_onnx(model_dir: Path, target: Path) -> None:
    """Write the graph of :func:`build_bert_graph` to ``target``."""
    from ragsieve.io import atomic_path

    model = build_bert_graph(model_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(target) as tmp:
        tmp.write_bytes(model.SerializeToString())
