import pytest
import torch

from mzlite._checks import as_float_tensor, check_finite, check_mask, check_same, resolve_device


def test_mask_none_means_every_element_is_real():
    m = check_mask(None, 2, 3, torch.device("cpu"))
    assert m.dtype == torch.bool and m.shape == (2, 3) and bool(m.all())


@pytest.mark.parametrize(
    ("mask", "exc", "match"),
    [
        (torch.ones(2, 3), TypeError, "bool"),
        (torch.ones(2, 4, dtype=torch.bool), ValueError, r"\(B, n\) = \(2, 3\)"),
        (
            torch.tensor([[True, False, False], [False, False, False]]),
            ValueError,
            r"no real element.*\[1\]",
        ),
    ],
)
def test_bad_masks_are_named(mask, exc, match):
    with pytest.raises(exc, match=match):
        check_mask(mask, 2, 3, torch.device("cpu"))


def test_float_conversion_and_rejections():
    assert as_float_tensor("x", [1, 2]).dtype == torch.get_default_dtype()
    like = torch.zeros(1, dtype=torch.float64)
    assert as_float_tensor("x", [1.0], like=like).dtype == torch.float64
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        as_float_tensor("x", torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="y contains NaN"):
        check_finite("y", torch.tensor([1.0, float("nan")]))
    with pytest.raises(TypeError, match="b has dtype torch.float64"):
        check_same(["a", "b"], [torch.zeros(1), torch.zeros(1, dtype=torch.float64)])


def test_device_resolution():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            resolve_device("cuda")
    valid = "'auto', 'cpu', 'cuda', 'cuda:N', 'mps' or 'meta'"
    for bad in ("gpu", "cuda0", "xla", "CPU", ""):  # torch.device takes "xla"; mzlite runs none
        with pytest.raises(ValueError, match=f"device must be {valid}, got {bad!r}"):
            resolve_device(bad)
    with pytest.raises(TypeError, match="device must be"):
        resolve_device(0)
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
