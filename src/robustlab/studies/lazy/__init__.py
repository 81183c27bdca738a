"""Study B — lazy training is not robust (lazy training, NeurIPS 2022): two studies, one package.

* ``common`` — the config of both studies (:class:`~.common.LazyConfig` and its two subclasses),
  the data, the start of every point, the per-network premises and the analysis helpers;
* ``attack`` — study ``lazy-attack`` (Thm 3.1, §5.1): SGD inside the lazy ball, then the
  minimal flipping step along the input gradient; its claims in ``attack_claims``;
* ``adversarial`` — study ``lazy-adversarial`` (§5.2, Alg. 1): projected adversarial training,
  robust accuracy against ε and against the radius; its claims in ``adversarial_claims``;
* ``figures`` — the figures of both.

The study modules import the claims and figures; the claims import only ``common`` (no cycle).
"""
