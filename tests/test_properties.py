"""Property-based: any shape, dim, dtype pair, memory layout and entry point against the float64 reference."""

import torch
from conftest import INPUT_DTYPES, OUTPUT_DTYPES, assert_affine_close, random_affine, random_input
from hypothesis import given, settings
from hypothesis import strategies as st

from fused_input_norm import affine, affine_out

settings.register_profile("ci", max_examples=300, deadline=None, derandomize=True, print_blob=True)
settings.load_profile("ci")

LAYOUTS = ["contiguous", "permuted", "sliced-step", "channels-last"]


@st.composite
def problems(draw):
    rank = draw(st.integers(1, 5))
    shape = draw(st.lists(st.sampled_from([0, 1, 2, 3, 5, 8, 17]), min_size=rank, max_size=rank))
    layout = draw(st.sampled_from(LAYOUTS))
    dim = draw(st.integers(-rank, rank - 1))
    in_dtype = draw(st.sampled_from(INPUT_DTYPES))
    out_dtype = draw(st.sampled_from(OUTPUT_DTYPES))
    entry = draw(
        st.sampled_from(["affine", "affine_out", "in-place"] if in_dtype == out_dtype else ["affine", "affine_out"])
    )
    perm = draw(st.permutations(range(rank)))
    seed = draw(st.integers(0, 2**31 - 1))
    return shape, layout, dim, in_dtype, out_dtype, entry, perm, seed


def build_input(shape, layout, perm, dtype, gen):
    """A tensor of `shape` whose memory is laid out as `layout` says."""
    if layout == "permuted":
        inverse = sorted(range(len(perm)), key=lambda i: perm[i])
        return random_input([shape[p] for p in perm], dtype, "cpu", gen).permute(inverse)
    if layout == "sliced-step":
        big = random_input([2 * s + 1 for s in shape], dtype, "cpu", gen)
        return big[tuple(slice(1, 1 + 2 * s, 2) for s in shape)]
    x = random_input(shape, dtype, "cpu", gen)
    if layout == "channels-last" and x.dim() == 4:
        return x.contiguous(memory_format=torch.channels_last)
    return x


@given(problems())
def test_matches_float64_reference(problem):
    shape, layout, dim, in_dtype, out_dtype, entry, perm, seed = problem
    gen = torch.Generator().manual_seed(seed)
    x = build_input(shape, layout, perm, in_dtype, gen)
    assert tuple(x.shape) == tuple(shape)
    weight, bias = random_affine(shape[dim], gen)
    original = x.clone()
    if entry == "affine":
        y = affine(x, weight, bias, dim, out_dtype)
    elif entry == "affine_out":
        y = torch.full(shape, float("nan"), dtype=out_dtype)
        affine_out(y, x, weight, bias, dim)
    else:
        y = x.contiguous()  # in place needs a contiguous out: normalize the contiguous copy in place
        original = y.clone()
        affine_out(y, y, weight, bias, dim)
    assert y.shape == x.shape and y.dtype == out_dtype and y.is_contiguous()
    assert_affine_close(y, original, weight, bias, dim)
    if entry != "in-place":
        assert torch.equal(x, original), "the input was modified"
