"""One session, many shapes (docs/dynamic_shapes.md): a small encoder with symbolic batch and
sequence dims (bench/dynamic_shapes.py's generator at toy size) run at alternating lengths
matches ONNX Runtime at every call, and compiles each shape once; kiln.specialize compiles
shapes at load; kiln.max_specializations bounds what the session keeps."""
import os
import sys

import numpy as np
import onnxruntime as ort
import pytest

import kiln

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "bench"))
from dynamic_shapes import feed_of, minilm_model  # noqa: E402

VOCAB = 50


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("dyn") / "encoder.onnx")
    minilm_model(path, layers=2, hidden=32, heads=4, ffn=64, vocab=VOCAB, seed=3)
    return path


@pytest.fixture(scope="module")
def reference(encoder):
    sess = ort.InferenceSession(encoder, providers=["CPUExecutionProvider"])
    return lambda feed: sess.run(None, feed)[0]


def _session(encoder, **entries):
    so = kiln.SessionOptions()
    so.intra_op_num_threads = 2
    for k, v in entries.items():
        so.add_session_config_entry(k, v)
    return kiln.InferenceSession(encoder, so)


def _check(sess, reference, batch, seq):
    feed = feed_of(batch, seq, vocab=VOCAB)
    got = sess.run(None, feed)[0]
    assert got.shape == (batch, seq, 32)
    np.testing.assert_allclose(got, reference(feed), rtol=1e-4, atol=1e-4)


def test_default_compiles_once_for_every_shape(encoder, reference):
    sess = _session(encoder)  # symbolic_shapes is a session's default
    for batch, seq in [(2, 5), (2, 12), (1, 5), (3, 31), (2, 5)]:
        _check(sess, reference, batch, seq)
    st = sess.stats()
    assert st["symbolic"], st["symbolic_reason"]
    assert st["compiles"] == 1


def test_alternating_lengths_compile_each_once(encoder, reference):
    sess = _session(encoder, **{"kiln.symbolic_shapes": "0"})  # the per-shape path
    for batch, seq in [(2, 5), (2, 12), (2, 5), (2, 12), (1, 5), (2, 5)]:
        _check(sess, reference, batch, seq)
    st = sess.stats()
    assert st["compiles"] == 3  # (2,5), (2,12), (1,5)
    assert st["specializations"] == 3
    assert st["constant_bytes"] > 0 and st["weight_bytes"] > 0


def test_specialize_entry_compiles_at_load(encoder, reference):
    sess = _session(encoder, **{"kiln.specialize": "batch=1;seq=4,9"})
    assert sess.stats()["compiles"] == 2
    _check(sess, reference, 1, 9)
    _check(sess, reference, 1, 4)
    assert sess.stats()["compiles"] == 2  # both runs were warm
    sess.specialize({"batch": 3, "seq": 7})
    assert sess.stats()["compiles"] == 3
    _check(sess, reference, 3, 7)
    assert sess.stats()["compiles"] == 3


def test_max_specializations_bounds_the_cache(encoder, reference):
    sess = _session(encoder, **{"kiln.max_specializations": "1", "kiln.symbolic_shapes": "0"})
    for seq in (6, 3, 6):
        _check(sess, reference, 1, seq)
    st = sess.stats()
    assert st["compiles"] == 3 and st["specializations"] == 1 and st["specialization_evictions"] == 2


@pytest.mark.parametrize("key,value", [("kiln.specialize", "seq"), ("kiln.specialize", "seq=4,x"),
                                       ("kiln.specialize", "seq=-1"), ("kiln.max_specializations", "0"),
                                       ("kiln.dim_ranges", "seq=4"), ("kiln.dim_ranges", "seq=9..4"),
                                       ("kiln.dim_ranges", "seq=-1..4")])
def test_bad_entries_are_invalid_argument(key, value):
    so = kiln.SessionOptions()
    with pytest.raises(kiln.InvalidArgument, match=key):
        so.add_session_config_entry(key, value)


def test_unknown_dim_in_specialize_names_it(encoder):
    with pytest.raises(kiln.InvalidArgument, match="'length'"):
        _session(encoder, **{"kiln.specialize": "length=4"})


def test_dim_ranges_refuse_a_run_outside_them(encoder, reference):
    """kiln.dim_ranges: runs inside match ONNX Runtime, a run outside is InvalidArgument naming the
    input, the dim, the value and the range; the session then still serves."""
    sess = _session(encoder, **{"kiln.dim_ranges": "seq=2..16;batch=1..4"})
    _check(sess, reference, 1, 2)
    _check(sess, reference, 4, 16)
    with pytest.raises(kiln.InvalidArgument, match=r"input 'input_ids' \(axis 1\): dimension 'seq' is 17, "
                                                   r"outside its declared range 2\.\.16"):
        sess.run(None, feed_of(1, 17, vocab=VOCAB))
    with pytest.raises(kiln.InvalidArgument, match=r"dimension 'batch' is 5, outside its declared range 1\.\.4"):
        sess.run(None, feed_of(5, 8, vocab=VOCAB))
    _check(sess, reference, 2, 9)


def test_dim_range_of_an_unknown_dim_names_it(encoder):
    with pytest.raises(kiln.InvalidArgument, match="'length'"):
        _session(encoder, **{"kiln.dim_ranges": "length=1..4"})
