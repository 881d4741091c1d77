"""The chain from a certificate to a privacy guarantee (issue 26): certificates are bound to their
network, typed bounds are claims (proven, refuted or explicitly trusted), undecided PTR queries
carry no guarantee, and every label says what a guarantee rests on.

Oracles: exact Jacobians of hand-built nets (f(x) = 10 relu(x - 1) has constant 10), brute-force
region enumeration on tiny nets, network fingerprints compared with byte-identical weights.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import certify
from certify.certificate import model_fingerprint
from certify.errors import BadInput
from certify.privacy import GaussInput, GaussOutput, LapOutput, LogisticOutput, calibrate
from certify.privacy.mechanisms import NoisyQuery
from certify.privacy.provenance import LipschitzSource, layer_product_bound, lipschitz_source
from certify.privacy.sampling import SecureSampler
from certify.ptr import ptr
from certify.ptr.search import StabilitySearch
from certify.ptr.grid import TestGrid
from models import zoo
from models.ir import sequential
from models.onnx_export import to_onnx

from .conftest import assert_bad_input


def kink() -> certify.Network:
    """f(x) = 10 relu(x - 1): Lipschitz constant 10 on any box reaching past x = 1."""
    return sequential([(np.array([[1.0]]), np.array([-1.0])), (np.array([[10.0]]), np.array([0.0]))], "kink")


def cancelling() -> certify.Network:
    """f(x) = relu(x) - relu(x) = 0: constant 0, but the layer product (certify's cheap bound) is 2."""
    return sequential([(np.array([[1.0], [1.0]]), np.zeros(2)), (np.array([[1.0, -1.0]]), np.zeros(1))], "cancel")


def save_onnx(net, path, dtype="float64") -> str:
    import onnx

    onnx.save(to_onnx(net, dtype=dtype), str(path))
    return str(path)


# ----------------------------------------------------------------------------- typed bounds
def test_a_false_global_bound_is_refuted_exit_2(cli, tmp_path):
    """The audit's reproduction: --global-bound 0.5 on a net of constant 10 released with 4x too little noise."""
    model = save_onnx(kink(), tmp_path / "kink.onnx")
    args = ("ptr", model, "--point", "1.2", "--radius", "0.5", "--epsilon", "1", "--delta", "1e-5",
            "--proposal", "1", "--json")
    r = cli(*args, "--global-bound", "0.5")
    assert_bad_input(r, "global bound 0.5", "is false", "norm 10")
    # trusting a bound a replayed witness refutes is still an error
    assert_bad_input(cli(*args, "--global-bound", "0.5", "--trust-global-bound"), "is false")
    # without it the same query finds phi = 0: the proposal fails at the point
    ok = cli(*args, "--seed", "1").json()
    assert ok["phi"] == 0 and ok["guarantee"]["basis"] == "worst-case"


def test_an_unverifiable_global_bound_needs_trust_and_labels_the_guarantee(cli, tmp_path):
    net = cancelling()
    model = save_onnx(net, tmp_path / "cancel.onnx")
    args = ("ptr", model, "--point", "0.3", "--radius", "0.5", "--epsilon", "1", "--delta", "1e-5",
            "--proposal", "1.5", "--seed", "3", "--global-bound", "1")
    assert_bad_input(cli(*args, "--json"), "cannot be verified", "--trust-global-bound")
    out = cli(*args, "--trust-global-bound", "--json").json()
    g = out["guarantee"]
    assert g["basis"] == "user" and "global Lipschitz bound 1" in g["conditional_on"][0]
    assert any("conditional" in n for n in out["notes"]) and out["steps"][0]["method"] == "global"
    text = cli(*args, "--trust-global-bound").out
    assert "conditional on" in text and "global Lipschitz bound 1" in text
    # a bound at or above certify's own proven bound (2 here) is no claim: certify's bound is used
    proven = cli(*args[:-1], "3", "--json").json()
    assert proven["guarantee"]["basis"] == "worst-case" and "conditional_on" not in proven["guarantee"]


def test_a_trusted_claim_is_checked_against_every_witness_the_search_replays():
    net = kink()
    grid = TestGrid.make(0.5, 1.0, 1e-5)
    search = StabilitySearch(net, np.array([0.0]), grid, global_bound=0.5)
    search.claimed_global = 0.5
    search.add_witness(np.array([0.2]), 0.0)  # below the claim: kept
    with pytest.raises(BadInput, match="is false"):
        search.add_witness(np.array([1.5]), 10.0)


def test_a_global_certificate_of_the_network_is_a_proof_for_ptr():
    net = cancelling()
    cert = certify.global_lipschitz(net, "naive", input_norm="linf", output_norm="l1")
    r = ptr(net, [0.3], 0.5, epsilon=1.0, delta=1e-5, proposal=2.5, sampler=0, global_bound=cert)
    assert r.guarantee.basis == "worst-case" and r.steps[0].method == "global"
    other = certify.global_lipschitz(kink(), "naive", input_norm="linf", output_norm="l1")
    with pytest.raises(BadInput, match="another network"):
        ptr(net, [0.3], 0.5, epsilon=1.0, delta=1e-5, proposal=2.5, sampler=0, global_bound=other)


# ----------------------------------------------------------------------------- model identity
def test_fingerprint_is_stable_across_reloads_and_torch_onnx_imports(tmp_path):
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    a = certify.from_torch(module)
    path = save_onnx(a, tmp_path / "m.onnx", dtype="float32")  # the torch weights are float32: exact
    b, c = certify.load_onnx(path), certify.load_onnx(path)
    assert a.fingerprint() == b.fingerprint() == c.fingerprint() == model_fingerprint(module)
    # any weight change gives another identity
    with torch.no_grad():
        module[2].bias[1] += 1e-7
    assert model_fingerprint(module) != a.fingerprint()


def test_a_certificate_of_a_works_for_reloads_of_a(tmp_path):
    """Nothing is refused that should pass: A's certificate calibrates A from its file and from torch."""
    torch.manual_seed(1)
    module = torch.nn.Sequential(torch.nn.Linear(3, 6), torch.nn.ReLU(), torch.nn.Linear(6, 2))
    path = save_onnx(certify.from_torch(module), tmp_path / "a.onnx", dtype="float32")
    cert = certify.global_lipschitz(certify.load_onnx(path), "naive", input_norm="l2", output_norm="l2")
    for model in (certify.load_onnx(path), certify.from_torch(module), module):
        m = GaussOutput(model, cert, epsilon=1.0, delta=1e-5, alpha=0.1, sampler=0)
        assert m.guarantee.lipschitz.origin == "certificate" and m.guarantee.basis == "worst-case"
        assert m.release(np.zeros(3)).shape == (2,)


def test_the_audits_mismatch_is_refused():
    """GaussOutput(net_B, certificate of net_A) calibrated sigma for A's constant: refused now."""
    a, b = zoo.random_relu_net([4, 8, 2], seed=0), zoo.random_relu_net([4, 8, 2], seed=1)
    cert_a = certify.global_lipschitz(a, "naive", input_norm="l2", output_norm="l2")
    with pytest.raises(BadInput, match="another network"):
        GaussOutput(b, cert_a, epsilon=1.0, delta=1e-5, alpha=0.1, sampler=0)
    with pytest.raises(BadInput, match="another network"):
        GaussOutput(b, layer_product_bound(a), epsilon=1.0, delta=1e-5, alpha=0.1, sampler=0)
    # a callable cannot be identified: a certificate is refused for it, a number is the user's claim
    with pytest.raises(BadInput, match="cannot identify"):
        GaussOutput(lambda x: b.forward(x), cert_a, epsilon=1.0, delta=1e-5, alpha=0.1, sampler=0)
    m = GaussOutput(lambda x: b.forward(x), 6.5, epsilon=1.0, delta=1e-5, alpha=0.1, sampler=0)
    assert m.guarantee.basis == "user"


def test_only_certify_makes_proven_lipschitz_sources():
    with pytest.raises(BadInput, match="made only by certify"):
        LipschitzSource(6.5, "l2", "l2", origin="certificate")
    with pytest.raises(BadInput, match="made only by certify"):
        LipschitzSource(6.5, "l2", "l2", origin="layer-product")
    net = zoo.random_relu_net([3, 5, 2], seed=2)
    cert = certify.global_lipschitz(net, "naive", input_norm="l2", output_norm="l2")
    assert lipschitz_source(cert, model=net).proven
    cert.upper = cert.upper / 4  # edited after issue: no longer certify's statement
    src = lipschitz_source(cert, model=net)
    assert not src.proven and src.origin == "user" and "did not issue" in src.method


@settings(max_examples=12)
@given(st.integers(0, 10_000), st.integers(0, 10_000), st.sampled_from([(3, 6, 2), (3, 4, 4, 2)]))
def test_every_consumer_refuses_the_certificate_of_another_network(seed_a, seed_b, sizes):
    a = zoo.random_relu_net(list(sizes), seed=seed_a)
    b = zoo.random_relu_net(list(sizes), seed=seed_b + 10_001)  # never the same seed: a != b
    assert a.fingerprint() != b.fingerprint()
    l1 = certify.global_lipschitz(a, "naive", input_norm="l2", output_norm="l1")
    l2 = certify.global_lipschitz(a, "naive", input_norm="l2", output_norm="l2")
    local = certify.local_lipschitz(a, np.zeros(3), 0.1, input_norm="l2", output_norm="l2", method="bounds")
    checks = [
        lambda: LapOutput(b, l1, epsilon=1.0, alpha=0.1, sampler=0),
        lambda: LogisticOutput(b, l1, epsilon=1.0, alpha=0.1, sampler=0),
        lambda: GaussOutput(b, l2, epsilon=1.0, delta=1e-5, alpha=0.1, sampler=0),
        lambda: GaussOutput(b, local, epsilon=1.0, delta=1e-5, alpha=0.1, sampler=0),
        lambda: calibrate("gauss-output", epsilon=1.0, delta=1e-5, lipschitz=l2, radius=0.1, model=b),
        lambda: ptr(b, np.zeros(3), 0.1, epsilon=1.0, delta=1e-5, proposal=1.0, sampler=0, input_norm="l2",
                    global_bound=l1),
    ]
    for check in checks:
        with pytest.raises(BadInput, match="another network"):
            check()
    # and each accepts the same certificate for a itself
    GaussOutput(a, l2, epsilon=1.0, delta=1e-5, alpha=0.1, sampler=0)
    calibrate("gauss-output", epsilon=1.0, delta=1e-5, lipschitz=l2, radius=0.1, model=a)


def test_every_engine_issues_its_certificate_for_its_network():
    net = zoo.random_relu_net([3, 6, 3], seed=4)
    x = np.array([0.1, -0.2, 0.3])
    certs = [certify.global_lipschitz(net, "naive"), certify.local_lipschitz(net, x, 0.05, method="bounds"),
             certify.robustness_radius(net, x, exact=False),
             ptr(net, x, 0.05, epsilon=1.0, delta=1e-5, proposal=100.0, sampler=0)]
    for cert in certs:
        assert cert.issued and cert.model_hash == net.fingerprint()
        assert cert.to_dict()["model_hash"] == net.fingerprint()


# ----------------------------------------------------------------------------- undecided PTR queries
def _hard_case():
    """A net and point where PTR's steps need the MILP (proposal between the proven bounds)."""
    net = zoo.random_relu_net([6, 24, 24, 4], seed=1)
    x = np.zeros(6)
    cert = certify.local_lipschitz(net, x, 0.3, input_norm="linf", output_norm="l1", method="bounds")
    return net, x, 0.5 * ((cert.lower or 0.0) + cert.upper)


def test_no_release_of_an_undecided_query_carries_a_guarantee():
    """Forced undecided steps (a tiny step limit), 40 seeded queries around the point: every undecided
    query is refused before its test (no output, no guarantee, no noise drawn); decided ones keep theirs."""
    net, x, proposal = _hard_case()
    rng = np.random.default_rng(0)
    undecided = 0
    for i in range(40):
        point = x + rng.uniform(-0.05, 0.05, size=x.size)
        r = ptr(net, point, 0.3, epsilon=1.0, delta=1e-5, proposal=proposal, sampler=i, step_time_limit=1e-6)
        if not r.decided:
            undecided += 1
            assert not r.released and r.output is None and r.guarantee is None and r.phi_noisy is None
            assert r.refusal and "noise_draw_units" not in r.test and r.to_dict()["guarantee"] is None
        else:
            assert r.guarantee is not None and r.refusal is None
    assert undecided >= 30  # the forcing worked (a test of the policy, not of a lucky run)


def test_cli_undecided_query_prints_no_guarantee(cli, tmp_path):
    net, x, proposal = _hard_case()
    model = save_onnx(net, tmp_path / "hard.onnx")
    args = ("ptr", model, "--point", ",".join(map(str, x)), "--radius", "0.3", "--epsilon", "1", "--delta", "1e-5",
            "--proposal", repr(proposal), "--step-time-limit", "0.001", "--seed", "0")
    out = cli(*args, "--json").json()
    assert out["decided"] is False and out["guarantee"] is None and out["released"] is False
    assert out["status"] in ("time_limit", "open_gap") and "undecided" in out["refusal"]
    assert "guarantee   none" in cli(*args).out


def test_ptr_json_keeps_the_drawn_test_noise():
    net = zoo.random_relu_net([3, 6, 3], seed=4)
    for seed in range(5):
        r = ptr(net, [0.1, -0.2, 0.3], 0.05, epsilon=1.0, delta=1e-5, proposal=100.0, sampler=seed)
        t = r.to_dict()["test"]
        grid = TestGrid.make(0.05, 1.0, 1e-5)
        assert t["noise_scale_units"] == float(grid.noise_units)
        assert t["noisy_phi_units"] == t["phi_units"] + t["noise_draw_units"]
        assert r.phi_noisy == pytest.approx(t["noisy_phi_units"] * float(grid.step))
        assert r.released == (t["noisy_phi_units"] >= t["threshold_units"])


# ----------------------------------------------------------------------------- labels
def test_labels_say_what_a_guarantee_rests_on():
    net = zoo.random_relu_net([3, 5, 2], seed=5)
    q = NoisyQuery("laplace", sensitivity=1.0, epsilon=1.0, sampler=0, metric="l2", alpha=0.1)
    assert q.guarantee.basis == "user" and q.to_dict()["guarantee"]["basis"] == "user"
    assert GaussInput(net, epsilon=1.0, delta=1e-5, alpha=0.1, sampler=0).guarantee.basis == "worst-case"
    assert LapOutput(net, layer_product_bound(net, "l2", "l1"), epsilon=1.0, alpha=0.1,
                     sampler=0).guarantee.basis == "worst-case"
    # a seeded exact sampler is not secure, and says so
    seeded = LapOutput(net, 3.0, epsilon=1.0, alpha=0.1, sampler=SecureSampler(random.Random(3)))
    assert "NOT secure" in seeded.to_dict()["sampler"] and "NOT secure" in repr(seeded)
    assert LapOutput(net, 3.0, epsilon=1.0, alpha=0.1).to_dict()["sampler"] == "secure"
    assert "NOT secure" in LapOutput(net, 3.0, epsilon=1.0, alpha=0.1, sampler=0).to_dict()["sampler"]
    # composition keeps every claim
    from certify.privacy import compose

    both = compose(q.guarantee, GaussInput(net, epsilon=1.0, delta=1e-5, alpha=0.1, sampler=0).guarantee)
    assert both.basis == "user" and both.claims == q.guarantee.claims
    assert math.isclose(both.epsilon, 2.0)
