"""The lazy-limit solver (studies/width_depth_init/linearised.py) against closed forms, float64:
the NTK against explicit Jacobians, the kernel-regression identity, the min-norm least-squares
step against torch.linalg.lstsq, and the input Jacobian of a one-hidden-layer network by hand."""

from __future__ import annotations

import torch

from robustlab.studies.width_depth_init import linearised as lin

D64 = torch.float64


def _net(d, widths, k, seed):
    g = torch.Generator().manual_seed(seed)
    dims = [d, *widths, k]
    return [torch.randn(a, b, generator=g, dtype=D64) * (2.0 / a) ** 0.5 for a, b in zip(dims, dims[1:])]


def _jacobian(ws, x):
    """Explicit ``J`` ``(N·k, P)`` of the outputs in the flattened weights (rows point-major)."""
    sizes = [w.numel() for w in ws]

    def f(flat):
        parts = torch.split(flat, sizes)
        return lin.mlp([p.reshape(w.shape) for p, w in zip(parts, ws)], x).reshape(-1)
    return torch.func.jacrev(f)(torch.cat([w.reshape(-1) for w in ws]))


def _data(n, d, k, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=D64)
    x = x / x.norm(dim=1, keepdim=True)
    y = torch.nn.functional.one_hot(torch.randint(0, k, (n,), generator=g), k).to(D64)
    return x, y


def test_ntk_equals_explicit_jacobian_products_at_depth_2_and_3():
    x, _ = _data(7, 5, 3)
    x2, _ = _data(4, 5, 3, seed=2)
    for widths in ([6], [4, 5]):
        ws = _net(5, widths, 3, 0)
        J, J2 = _jacobian(ws, x), _jacobian(ws, x2)
        assert torch.allclose(lin.ntk(ws, x), J @ J.T, rtol=1e-12, atol=1e-12)
        assert torch.allclose(lin.ntk(ws, x, x2), J @ J2.T, rtol=1e-12, atol=1e-12)


def test_over_parameterised_solution_interpolates_and_is_kernel_regression():
    x, y = _data(6, 5, 2)
    xt, _ = _data(9, 5, 2, seed=3)
    ws = _net(5, [40], 2, 0)  # P = 280 >> n k = 12: Θ full rank
    dws, info = lin.solve(ws, x, y)
    assert info["rank"] == 12
    assert torch.allclose(lin.linearised(ws, dws, x), y, atol=1e-9)
    r = (y - lin.mlp(ws, x)).reshape(-1)
    kr = lin.mlp(ws, xt) + (lin.ntk(ws, xt, x) @ torch.linalg.solve(lin.ntk(ws, x), r)).reshape(9, 2)
    assert torch.allclose(lin.linearised(ws, dws, xt), kr, atol=1e-9)


def test_under_parameterised_step_is_the_min_norm_least_squares_solution():
    x, y = _data(30, 5, 3)
    ws = _net(5, [1], 3, 4)  # P = 8 < n k = 90: J has full column rank at most 8
    dws, info = lin.solve(ws, x, y)
    J = _jacobian(ws, x)
    r = (y - lin.mlp(ws, x)).reshape(-1)
    ref = torch.linalg.lstsq(J, r[:, None], driver="gelsd").solution[:, 0]
    assert info["rank"] <= 8
    assert torch.allclose(torch.cat([d.reshape(-1) for d in dws]), ref, atol=1e-8)


def test_input_jacobian_of_a_one_hidden_layer_network_by_hand():
    x, y = _data(8, 5, 3)
    xt, _ = _data(11, 5, 3, seed=5)
    ws = _net(5, [7], 3, 2)
    dws, _ = lin.solve(ws, x, y)
    W1, W2 = ws
    dW1, dW2 = dws
    D = (xt @ W1 > 0).to(D64)  # (N, m)
    # J_x f_lin = (W2 + dW2)ᵀ diag(D) W1ᵀ + W2ᵀ diag(D) dW1ᵀ (ReLU'' = 0 almost everywhere)
    jac = torch.einsum("mk,nm,dm->nkd", W2 + dW2, D, W1) + torch.einsum("mk,nm,dm->nkd", W2, D, dW1)
    assert torch.allclose(lin.input_jacobian_sq(ws, dws, xt, chunk=4), jac.pow(2).sum((1, 2)), rtol=1e-10)


def test_linearised_forward_equals_torch_func_jvp():
    x, _ = _data(9, 5, 3)
    ws, dws = _net(5, [6, 4], 3, 0), _net(5, [6, 4], 3, 7)
    f0, jd = torch.func.jvp(lambda *w: lin.mlp(w, x), tuple(ws), tuple(dws))
    assert torch.allclose(lin.linearised(ws, dws, x), f0 + jd, rtol=1e-12, atol=1e-12)


def test_a_dead_network_has_an_empty_kernel_and_stays_at_its_initialisation():
    x, y = _data(6, 5, 2)
    ws = _net(5, [1], 2, 0)
    ws[0] = torch.zeros_like(ws[0])  # a unit that never fires (ReLU'(0) = 0): Θ = 0
    dws, info = lin.solve(ws, x, y)
    assert info["rank"] == 0 and info["lambda_min_kept"] is None
    assert all(float(d.abs().max()) == 0.0 for d in dws)


def test_closed_form_jvp_matches_forward_ad():
    """run._mlp_jvp (the finite-difference check's tangent, issue 54) against torch.func.jvp, float64."""
    from robustlab.models import DeepMLP
    from robustlab.studies.width_depth_init import run as R

    gens = [torch.Generator().manual_seed(s) for s in range(3)]
    for L in (2, 3, 4):
        net = DeepMLP(7, 16, L, 3, init="he", generators=gens, dtype=torch.float64)
        g = torch.Generator().manual_seed(L)
        x = torch.randn(3, 11, 7, generator=g, dtype=torch.float64)
        v = torch.randn(3, 11, 7, generator=g, dtype=torch.float64)
        f0, jd = R._mlp_jvp(net, x, v)
        f1, jd1 = torch.func.jvp(net, (x,), (v,))
        assert torch.allclose(f0, f1, atol=1e-12) and torch.allclose(jd, jd1, atol=1e-12)


def test_deep_networks_ntk_solve_and_linearisation_match_explicit_jacobians():
    """The depth arm of depth-init-trained (depths up to 6, review defect 6): Θ = J Jᵀ, the min-norm step
    = lstsq on the explicit J, and f_lin = f₀ + J Δθ, at depths 4 and 6, He and LeCun scales."""
    x, y = _data(6, 5, 2)
    xt, _ = _data(5, 5, 2, seed=7)
    for widths, scale in (([4, 5, 3], 1.0), ([3, 4, 3, 4, 3], 0.5 ** 0.5)):  # He; LeCun = He / sqrt 2 per layer
        ws = [w * scale for w in _net(5, widths, 2, 3)]
        J = _jacobian(ws, x)
        assert torch.allclose(lin.ntk(ws, x), J @ J.T, rtol=1e-10, atol=1e-12)
        dws, _ = lin.solve(ws, x, y)
        r = (y - lin.mlp(ws, x)).reshape(-1)
        ref = torch.linalg.lstsq(J, r[:, None], driver="gelsd").solution[:, 0]
        flat = torch.cat([d.reshape(-1) for d in dws])
        assert torch.allclose(flat, ref, atol=1e-8)
        ft = lin.mlp(ws, xt).reshape(-1) + _jacobian(ws, xt) @ flat
        assert torch.allclose(lin.linearised(ws, dws, xt).reshape(-1), ft, atol=1e-10)


def test_he_and_lecun_lazy_limits_share_the_kernel_interpolant():
    """Why the lazy limit's depth trend barely depends on the init (notes/wdi6.md): from one seed He's weights
    are LeCun's times sqrt 2 in every layer, so Θ_He = 2^(L-1) Θ_LeCun exactly, kernel regression is blind to
    the kernel's scale, and the two solutions differ only through the init functions:
    f_lin,He - f_lin,LeCun = (2^(L/2) - 1) (f0_LeCun(x) - Θ(x, X) Θ⁻¹ f0_LeCun(X))."""
    x, y = _data(6, 5, 2)
    xt, _ = _data(5, 5, 2, seed=9)
    for widths in ([30], [20, 20, 20]):
        L = len(widths) + 1
        le = [w / 2 ** 0.5 for w in _net(5, widths, 2, 6)]
        he = [w * 2 ** 0.5 for w in le]
        assert torch.allclose(lin.ntk(he, x), 2 ** (L - 1) * lin.ntk(le, x), rtol=1e-12)
        f_he = lin.linearised(he, lin.solve(he, x, y)[0], xt)
        f_le = lin.linearised(le, lin.solve(le, x, y)[0], xt)
        resid = lin.mlp(le, xt).reshape(-1) - lin.ntk(le, xt, x) @ torch.linalg.solve(lin.ntk(le, x),
                                                                                         lin.mlp(le, x).reshape(-1))
        assert torch.allclose((f_he - f_le).reshape(-1), (2 ** (L / 2) - 1) * resid, atol=1e-8)
